"""What an agent is and what it sees of its run."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, ClassVar, NoReturn, Protocol

from ag_ui.core import Interrupt, RunAgentInput, TokenUsage


class AgentError(Exception):
    """An agent failure whose message is safe to show to the person using the client.

    The run ends ``failed`` with a ``RUN_ERROR`` carrying ``code`` and ``message``.
    """

    def __init__(self, message: str, code: str = "agent_error") -> None:
        super().__init__(message)
        self.message = message
        self.code = code


class InvalidInput(ValueError):
    """Raised by ``Agent.check_input``: the request is refused with 422
    ``invalid_request`` before anything is stored; ``field`` names what to change."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class RunSuspended(BaseException):
    """Raised by ``ctx.interrupt``: the run ends waiting for human input.

    A BaseException so that an agent's ``except Exception`` cannot swallow it.
    """

    def __init__(self, interrupts: list[dict[str, Any]]) -> None:
        super().__init__("run suspended on interrupts")
        self.interrupts = interrupts


NOT_DONE: Any = object()
"""Return this from an effect's ``reconcile`` when the effect provably never happened."""


@dataclass(frozen=True)
class Capabilities:
    """What an agent declares about itself (``GET /agents``)."""

    description: str = ""
    supports_resume: bool = False  # can restart from a boundary snapshot (enables G8 resume)
    interrupts: bool = False
    journaled_effects: bool = False

    def to_json(self) -> dict[str, Any]:
        """The wire shape shown by ``GET /agents``."""
        return {
            "description": self.description,
            "supportsResume": self.supports_resume,
            "interrupts": self.interrupts,
            "journaledEffects": self.journaled_effects,
        }


@dataclass(frozen=True)
class ToolEffect:
    """An effect as a person is asked about it when it is in doubt: its journal key,
    and the tool call it carries out (name, arguments, call id) when there is one."""

    key: str
    tool: str | None = None
    args: Any = None
    tool_call_id: str | None = None


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

    @property
    def reason(self) -> str | None:
        """The reason the person gave with their answer (a denial's, say), if any."""
        if isinstance(self.payload, dict) and isinstance(self.payload.get("reason"), str):
            return str(self.payload["reason"])
        return None

    @property
    def edited_args(self) -> dict[str, Any] | None:
        """Arguments the person edited before approving a tool call, if any."""
        if isinstance(self.payload, dict) and isinstance(self.payload.get("editedArgs"), dict):
            return dict(self.payload["editedArgs"])
        return None


class RunContext(Protocol):
    """What an agent sees of its run; the only way it talks to the engine."""

    NOT_DONE: ClassVar[Any] = NOT_DONE
    """``ctx.NOT_DONE`` (and ``RunContext.NOT_DONE``) is ``outlast.agent.NOT_DONE``."""
    run_id: str
    thread_id: str
    attempt: int
    input: RunAgentInput
    forwarded_props: Any
    resume: list[Resolution]
    session_state: dict[str, Any]
    """Private state kept with the thread's snapshot, never shown to clients."""
    resumed: bool
    """True when this attempt continues a run an earlier attempt started (crash resume)."""

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The conversation as folded so far (wire-shaped dicts; treat as read-only)."""

    @property
    def state(self) -> Any:
        """The shared state as folded so far (read-only; change it with STATE_* events)."""

    @property
    def cancelled(self) -> bool:
        """True once a cancel was requested; the CancelledError follows at the next await."""

    def new_id(self, prefix: str = "id") -> str:
        """A fresh id for a message or tool call."""

    async def emit(self, event: Any) -> None:
        """Append an AG-UI event (an ``ag_ui.core`` model or a wire dict) to the run.

        The event is checked against the AG-UI schema and ordering rules (G11); an
        invalid one ends the run failed with ``agent_protocol_error``."""

    async def boundary(self) -> None:
        """Mark a safe boundary now: the snapshot is saved here regardless of throttling."""

    def record_usage(self, usage: TokenUsage | dict[str, Any], *,
                     finish_reason: str | None = None) -> None:
        """Count one model call's tokens, just made: an ``ag_ui.core.TokenUsage`` or its
        wire dict (``inputTokens``, ``outputTokens``, ``totalTokens``,
        ``reasoningTokens``, ``cachedInputTokens``, ``provider``, ``model``). The engine
        sums them per provider and model into the run's final event
        (``RUN_FINISHED.usage`` or ``RUN_ERROR.usage``, AG-UI 1.0), keeps them in the
        usage ledger and, with tracing on, reports the call as a ``chat`` span (with
        ``finish_reason``). A malformed value raises ``ValueError``."""

    async def interrupt(self, *interrupts: Interrupt | dict[str, Any]) -> NoReturn:
        """End the run waiting for human input; answers arrive in the next run's ``resume``."""

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
        """Run a side effect at most once per run (G9) and return its (recorded) result.

        ``key`` must be stable across attempts (a step number, a tool call id). The
        result must be JSON-serializable. If an earlier attempt started the effect but
        never recorded its completion, it is *in doubt*: ``reconcile`` is asked what
        happened (return the result, or ``NOT_DONE`` to run it again); without one, the
        run ends with a question to a person (an interrupt with ``reason:
        "confirmation"``, naming ``tool``, ``args`` and ``tool_call_id`` when given),
        unless ``retry_uncertain`` says to run it again. In the continuation, the same
        key gets the person's answer: the result they gave, a run, or the run failing
        with ``effect_uncertain`` (``outlast.agent.in_doubt``).

        ``interruptible=False`` says that ``fn`` cannot be stopped once begun (a blocking
        call in a thread, a request already sent): when the attempt running it loses its
        lease (a partition), it may still complete there after another process took the
        run over. Found in doubt, such an effect is never reconciled (the check would
        race it) nor run again: a person is asked, unless ``retry_uncertain``."""

    async def confirm_in_doubt(self, effects: Iterable[ToolEffect]) -> None:
        """Ask about every one of ``effects`` an earlier attempt left in doubt at once,
        one question each, ending the run (effects without a journal entry, or with a
        result, are not asked about); and fail the run now with ``effect_uncertain``
        for one a person answered must not run. Call it before executing calls an
        earlier attempt may have started, so that several are asked together."""


def interrupt_items(interrupts: tuple[Interrupt | dict[str, Any], ...]) -> list[dict[str, Any]]:
    """Interrupts in their wire shape, each checked against the AG-UI schema."""
    items = [
        i.model_dump(mode="json", by_alias=True)
        if isinstance(i, Interrupt) else dict(i)
        for i in interrupts
    ]
    for item in items:
        Interrupt.model_validate(item)
    return items


class Agent(ABC):
    """An agent turn: read the context, emit AG-UI events, return when done.

    Cooperate with cancellation (G6): do work in ``await``-able steps so the
    ``asyncio.CancelledError`` that stops a run reaches you, and never swallow it.
    """

    capabilities: Capabilities = Capabilities()

    def check_input(self, run_input: RunAgentInput) -> None:
        """Refuse a request this agent cannot run, at admission, before anything is
        stored: raise ``InvalidInput`` (a 422 naming its ``field``). Accepts all by
        default; it must not block or have side effects."""
        return None

    @abstractmethod
    async def run(self, ctx: RunContext) -> Any:
        """Execute one run. A JSON value returned becomes ``RUN_FINISHED.result`` and is
        kept in the run record's ``outcome.result`` (a model's finish reason, token usage)."""
