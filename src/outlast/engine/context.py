"""The engine's implementation of the SDK's ``RunContext``.

It holds exactly what an agent may reach: its run's identity and input, a read
view of the fold, the event sink, the effect journal and the cancel flag (a
narrow ``RunPort`` the execution implements), never the engine itself.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, ClassVar, NoReturn, Protocol

from ag_ui.core import Interrupt, RunAgentInput, TokenUsage
from pydantic import ValidationError

from outlast.agent import NOT_DONE, Resolution, RunSuspended, in_doubt, interrupt_items
from outlast.agent.in_doubt import ToolEffect
from outlast.store.base import EffectRecord, InterruptRecord
from outlast.tracing import TRACING

MAX_TOKEN_COUNT = 2**53 - 1


def resolutions_of(answered: list[InterruptRecord]) -> list[Resolution]:
    """The interrupts a continuation answers, as its agent sees them (``ctx.resume``)."""
    return [Resolution(i.body, (i.resolution or {}).get("status", "resolved"),
                       (i.resolution or {}).get("payload")) for i in answered]


class RunPort(Protocol):
    """The services one run's context needs from its execution."""

    @property
    def messages(self) -> list[dict[str, Any]]: ...
    @property
    def state(self) -> Any: ...
    @property
    def cancelled(self) -> bool: ...
    async def emit(self, event: Any) -> None: ...
    async def mark_boundary(self) -> None: ...
    def add_usage(self, usage: TokenUsage, finish_reason: str | None = None) -> None: ...
    async def flush(self) -> None: ...
    async def effect_get(self, key: str) -> EffectRecord | None: ...
    async def effect_start(self, key: str) -> None: ...
    async def effect_complete(self, key: str, result_json: str) -> None: ...


class EngineRunContext:
    """What an agent sees of its run (``outlast.agent.RunContext``)."""

    NOT_DONE: ClassVar[Any] = NOT_DONE

    def __init__(self, port: RunPort, *, run_id: str, thread_id: str, attempt: int,
                 input: dict[str, Any], session_state: dict[str, Any], resumed: bool,
                 resolutions: list[Resolution]) -> None:
        self._port = port
        self.run_id = run_id
        self.thread_id = thread_id
        self.attempt = attempt
        self.input = RunAgentInput.model_validate(input)
        self.forwarded_props: Any = self.input.forwarded_props
        self.resume = resolutions
        self.session_state = session_state
        self.resumed = resumed

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The conversation as folded so far (wire-shaped dicts; treat as read-only)."""
        return self._port.messages

    @property
    def state(self) -> Any:
        """The shared state as folded so far."""
        return self._port.state

    @property
    def cancelled(self) -> bool:
        """True once a cancel was requested; the CancelledError follows at the next await."""
        return self._port.cancelled

    def new_id(self, prefix: str = "id") -> str:
        """A fresh id for a message or tool call."""
        return f"{prefix}_{uuid.uuid4().hex[:16]}"

    async def emit(self, event: Any) -> None:
        """Append an AG-UI event to the run (checked first, G11; shown once committed, G2)."""
        await self._port.emit(event)

    async def boundary(self) -> None:
        """Mark a safe boundary now: the snapshot is saved here regardless of throttling."""
        await self._port.mark_boundary()

    def record_usage(self, usage: TokenUsage | dict[str, Any], *,
                     finish_reason: str | None = None) -> None:
        """Count one model call's tokens toward the run's final event (AG-UI 1.0 usage)."""
        if not isinstance(usage, TokenUsage):
            try:
                usage = TokenUsage.model_validate(usage, strict=True)
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(p) for p in first["loc"]) or "usage"
                raise ValueError(f"record_usage: {where}: {first['msg']}") from None
        for name, count in usage:
            # Every AG-UI binding must carry the count (JavaScript's safe integers).
            if isinstance(count, int) and not 0 <= count <= MAX_TOKEN_COUNT:
                raise ValueError(f"record_usage: {name}: {count} is not a token count")
        self._port.add_usage(usage, finish_reason)

    async def interrupt(self, *interrupts: Interrupt | dict[str, Any]) -> NoReturn:
        """End the run waiting for human input."""
        raise RunSuspended(interrupt_items(interrupts))

    async def effect(
        self,
        key: str,
        fn: Callable[[], Awaitable[Any]],
        *,
        reconcile: Callable[[], Awaitable[Any]] | None = None,
        retry_uncertain: bool = False,
        tool: str | None = None,
        args: Any = None,
        tool_call_id: str | None = None,
        interruptible: bool = True,
    ) -> Any:
        """Run a side effect at most once per run (G9) and return its (recorded) result."""
        port = self._port
        record = await port.effect_get(key)
        if record is not None and record.status == "completed":
            return record.result
        answer = in_doubt.answer_for(self.resume, key) if record is None else None
        if answer is not None:  # a person answered an earlier run's question about it
            said, result = in_doubt.verdict(answer)
            if said == "fail":
                raise in_doubt.refused(answer)
            if said == "happened":
                await port.effect_start(key)
                await port.effect_complete(key, json.dumps(result))
                return result
        elif record is not None and not retry_uncertain:  # started, never finished
            # One that cannot be interrupted may still be running where the attempt that
            # started it lost its lease (a partition): a check would race it, so a person
            # is asked.
            check = reconcile if interruptible else None
            found = NOT_DONE if check is None else await check()
            if found is not NOT_DONE:
                await port.effect_complete(key, json.dumps(found))
                return found
            if check is None:
                raise RunSuspended([in_doubt.question(
                    self.run_id, ToolEffect(key, tool, args, tool_call_id), record.attempt)])
        # G2 + G9: everything emitted before the effect is durable before it runs.
        await port.flush()
        await port.effect_start(key)
        with TRACING.tool(self, key, tool, tool_call_id):
            result = await fn()
        await port.effect_complete(key, json.dumps(result))
        return result

    async def confirm_in_doubt(self, effects: Iterable[ToolEffect]) -> None:
        """Ask about every one of ``effects`` in doubt at once (one question each), and
        fail now for one a person said must not run."""
        questions = []
        for effect in effects:
            record = await self._port.effect_get(effect.key)
            if record is None:
                answer = in_doubt.answer_for(self.resume, effect.key)
                if answer is not None and in_doubt.verdict(answer)[0] == "fail":
                    raise in_doubt.refused(answer)
            elif record.status == "started":
                questions.append(in_doubt.question(self.run_id, effect, record.attempt))
        if questions:
            raise RunSuspended(questions)
