"""The RunContext an agent receives: emit, boundaries, interrupts, effects, session state."""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

from ag_ui.core import Interrupt, RunAgentInput

from outlast.errors import EffectUncertain

if TYPE_CHECKING:
    from outlast.engine.execution import RunExecution


class RunSuspended(BaseException):
    """Raised by ``ctx.interrupt``: the run ends waiting for human input.

    A BaseException so that an agent's ``except Exception`` cannot swallow it.
    """

    def __init__(self, interrupts: list[dict[str, Any]]) -> None:
        super().__init__("run suspended on interrupts")
        self.interrupts = interrupts


@dataclass(frozen=True)
class Resolution:
    """An answered interrupt handed to the continuation run."""

    interrupt: dict[str, Any]  # the interrupt as raised (wire shape)
    status: str  # "resolved" or "cancelled"
    payload: Any

    @property
    def approved(self) -> bool:
        """True for a resolved answer whose payload approves (or carries no verdict)."""
        if self.status != "resolved":
            return False
        if isinstance(self.payload, dict):
            return bool(self.payload.get("approved", True))
        return self.payload is not False


_NOT_DONE = object()


class RunContext:
    """What an agent sees of its run; the only way it talks to the engine."""

    NOT_DONE = _NOT_DONE
    """Return this from an effect's ``reconcile`` when the effect provably never happened."""

    def __init__(self, execution: RunExecution, resolutions: list[Resolution]) -> None:
        self._x = execution
        self.run_id = execution.run.id
        self.thread_id = execution.run.thread_id
        self.attempt = execution.run.attempts
        self.input = RunAgentInput.model_validate(execution.run.input)
        self.forwarded_props: Any = self.input.forwarded_props
        self.resume = resolutions
        self.session_state: dict[str, Any] = execution.session_state
        self.resumed = execution.resumed

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The conversation as folded so far (wire-shaped dicts; treat as read-only)."""
        return self._x.fold.messages

    @property
    def state(self) -> Any:
        """The shared state as folded so far (read-only; change it with STATE_* events)."""
        return self._x.fold.state

    @property
    def cancelled(self) -> bool:
        """True once a cancel was requested; the CancelledError follows at the next await."""
        return self._x.cancel_reason is not None

    def new_id(self, prefix: str = "id") -> str:
        """A fresh id for a message or tool call."""
        return f"{prefix}_{uuid.uuid4().hex[:16]}"

    async def emit(self, event: Any) -> None:
        """Append an AG-UI event (a model from ``ag_ui.core`` or a wire dict) to the run."""
        await self._x.emit(event)

    async def boundary(self) -> None:
        """Mark a safe boundary now: the snapshot is saved here regardless of throttling."""
        await self._x.mark_boundary()

    async def interrupt(self, *interrupts: Interrupt | dict[str, Any]) -> NoReturn:
        """End the run waiting for human input; the answers arrive in the next run's ``resume``."""
        items = [
            i.model_dump(mode="json", by_alias=True) if isinstance(i, Interrupt) else dict(i)
            for i in interrupts
        ]
        for item in items:
            Interrupt.model_validate(item)
        raise RunSuspended(items)

    async def effect(
        self,
        key: str,
        fn: Callable[[], Awaitable[Any]],
        *,
        reconcile: Callable[[], Awaitable[Any]] | None = None,
        retry_uncertain: bool = False,
    ) -> Any:
        """Run a side effect at most once per run (G9) and return its (recorded) result.

        ``key`` must be stable across attempts (a step number, a tool call id).
        The result must be JSON-serializable. If an earlier attempt started the
        effect but never recorded its completion, ``reconcile`` is asked what
        happened (return the result, or ``ctx.NOT_DONE``); without one,
        ``EffectUncertain`` is raised unless ``retry_uncertain`` is set.
        """
        x = self._x
        record = await x.engine.store.effect_get(x.run.rid, key)
        if record is not None and record.status == "completed":
            return record.result
        if record is not None and record.status == "started" and not retry_uncertain:
            if reconcile is None:
                raise EffectUncertain(
                    f"effect {key!r} started in an earlier attempt; its outcome is unknown",
                    key=key,
                )
            found = await reconcile()
            if found is not _NOT_DONE:
                await x.effect_complete(key, json.dumps(found))
                return found
        # G2 + G9: everything emitted before the effect is durable before it runs.
        await x.flush()
        await x.effect_start(key)
        result = await fn()
        await x.effect_complete(key, json.dumps(result))
        return result
