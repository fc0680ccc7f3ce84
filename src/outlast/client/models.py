"""Typed views of the service's JSON answers. Each keeps the whole answer in ``raw``
so that fields added by newer servers stay reachable."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

FINAL = frozenset({"succeeded", "failed", "cancelled", "interrupted"})

# One stored event of a run with its ``seq`` (spec §4).
SeqEvent = tuple[int, dict[str, Any]]


@dataclass(frozen=True)
class RunHandle:
    """An admitted run's address (G4); ``replayed`` when the request attached to a run
    admitted before under the same idempotency key (G3)."""

    run_id: str
    thread_id: str
    replayed: bool = False


@dataclass(frozen=True)
class Interrupt:
    """A durable request for human input (G7)."""

    id: str
    status: str
    run_id: str | None
    reason: str | None
    message: str | None
    tool_call_id: str | None
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Interrupt:
        """Parse one item of a thread's or run's ``interrupts``."""
        return cls(id=data["id"], status=data.get("status", "pending"),
                   run_id=data.get("runId"), reason=data.get("reason"),
                   message=data.get("message"), tool_call_id=data.get("toolCallId"), raw=data)

    @property
    def in_doubt(self) -> bool:
        """Asks whether a tool cut off by a crash happened (answer with
        ``answer(..., payload={"answer": "happened" | "run_again" | "fail"})``)."""
        meta = self.raw.get("metadata")
        return isinstance(meta, dict) and meta.get("kind") == "effect_in_doubt"

    @property
    def pending(self) -> bool:
        """Still waiting for an answer (an expired one can only be cancelled)."""
        return self.status in ("pending", "expired")


@dataclass(frozen=True)
class RunRecord:
    """``GET /runs/{id}``: a run's status, timestamps, attempts, last ``seq``, outcome."""

    run_id: str
    thread_id: str
    agent: str
    status: str
    created_at: float | None
    started_at: float | None
    finished_at: float | None
    attempts: int
    last_seq: int
    outcome: dict[str, Any] | None
    error: dict[str, Any] | None
    cancel_requested: bool
    interrupts: list[Interrupt]
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunRecord:
        """Parse a run record."""
        return cls(
            run_id=data["runId"], thread_id=data["threadId"], agent=data.get("agent", ""),
            status=data["status"], created_at=data.get("createdAt"),
            started_at=data.get("startedAt"), finished_at=data.get("finishedAt"),
            attempts=int(data.get("attempts") or 0), last_seq=int(data.get("lastSeq") or 0),
            outcome=data.get("outcome"), error=data.get("error"),
            cancel_requested=bool(data.get("cancelRequested")),
            interrupts=[Interrupt.from_json(i) for i in data.get("interrupts") or []],
            raw=data)

    @property
    def final(self) -> bool:
        """The run has ended (it will emit nothing more)."""
        return self.status in FINAL


@dataclass(frozen=True)
class ActiveRun:
    """The run a thread is busy with, and how far its log has come."""

    run_id: str
    status: str
    last_seq: int


@dataclass(frozen=True)
class ThreadSummary:
    """One item of ``GET /threads``."""

    thread_id: str
    title: str | None
    status: str
    created_at: float | None
    updated_at: float | None
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ThreadSummary:
        """Parse a thread summary."""
        return cls(thread_id=data["threadId"], title=data.get("title"), status=data["status"],
                   created_at=data.get("createdAt"), updated_at=data.get("updatedAt"),
                   raw=data)


@dataclass(frozen=True)
class Thread:
    """``GET /threads/{id}``: the snapshot as of its latest safe boundary (G5), pending
    interrupts and the active run, if any."""

    thread_id: str
    title: str | None
    status: str
    messages: list[dict[str, Any]]
    state: Any
    interrupts: list[Interrupt]
    as_of: dict[str, Any] | None
    active_run: ActiveRun | None
    forked_from: dict[str, Any] | None
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Thread:
        """Parse a thread view."""
        active = data.get("activeRun")
        return cls(
            thread_id=data["threadId"], title=data.get("title"), status=data["status"],
            messages=list(data.get("messages") or []), state=data.get("state"),
            interrupts=[Interrupt.from_json(i) for i in data.get("interrupts") or []],
            as_of=data.get("asOf"),
            active_run=None if not active else ActiveRun(
                active["runId"], active["status"], int(active.get("lastSeq") or 0)),
            forked_from=data.get("forkedFrom"), raw=data)

    @property
    def pending_interrupts(self) -> list[Interrupt]:
        """The interrupts a resume must answer."""
        return [i for i in self.interrupts if i.pending]
