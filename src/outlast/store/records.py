"""The records the store reads and writes: plain data, no behaviour beyond decoding a row."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, Literal, NamedTuple

FINAL = ("interrupted", "succeeded", "failed", "cancelled")
Multitask = Literal["reject", "enqueue", "interrupt"]


def _loads(text: str | None, default: Any = None) -> Any:
    return default if text is None else json.loads(text)


@dataclass(frozen=True)
class ThreadRecord:
    """A conversation: its status and the coordinate its snapshot is as of."""

    tid: int
    principal: str
    id: str
    title: str | None
    status: str
    created_at: float
    updated_at: float
    as_of_run: str | None
    as_of_seq: int | None
    forked_from: dict[str, Any] | None = None  # {"threadId", "runId", "seq"} of a fork

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> ThreadRecord:
        return cls(
            tid=row["tid"], principal=row["principal"], id=row["id"], title=row["title"],
            status=row["status"], created_at=row["created_at"], updated_at=row["updated_at"],
            as_of_run=row["as_of_run"], as_of_seq=row["as_of_seq"],
            forked_from=_loads(row.get("forked_from")),
        )


@dataclass(frozen=True)
class RunRecord:
    """One admitted request executing one agent turn on a thread."""

    rid: int
    principal: str
    id: str
    tid: int
    thread_id: str
    agent: str
    status: str
    idempotency_key: str
    fingerprint: str
    # The RunAgentInput as stored (``input`` reads it): only in the records of the
    # claims that start a run and of its admission; every other read of a run leaves
    # it out (the run_records view), as it is whatever history the client resent.
    input_json: str | None
    options: dict[str, Any]
    created_at: float
    started_at: float | None
    finished_at: float | None
    attempts: int
    last_seq: int
    outcome: dict[str, Any] | None
    error: dict[str, Any] | None
    lease_holder: str | None
    lease_expires_at: float | None
    cancel_requested: bool
    # When retention removed its events (spec §6); None while they are kept.
    compacted_at: float | None = None
    # The input's protocolVersion, which decides a stream's format (is_legacy).
    protocol_version: str | None = None

    @cached_property
    def input(self) -> dict[str, Any]:
        """The run's RunAgentInput, read on first use: most reads of a run (a stream's, a
        listing's) never need it, and it carries whatever history the client resent."""
        return _loads(self.input_json, {})  # type: ignore[no-any-return]

    def started(self) -> RunRecord:
        """This record once its ``RUN_STARTED`` is logged (seq 1), with its input as read
        so far: the claim that starts a run has read it, the execution reads it next."""
        out = replace(self, last_seq=1)
        if "input" in self.__dict__:
            out.__dict__["input"] = self.__dict__["input"]
        return out

    def without_input(self) -> RunRecord:
        """This record without its input, for a holder that outlives its use of it: a
        stream, or an execution once its agent's context holds the input. The input is
        whatever history the client resent, and a run that streams for twenty minutes
        should not keep a copy of it per holder; ``input`` of the copy is empty."""
        if self.input_json is None:
            return self
        return replace(self, input_json=None)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> RunRecord:
        return cls(
            rid=row["rid"], principal=row["principal"], id=row["id"], tid=row["tid"],
            thread_id=row["thread_id"], agent=row["agent"], status=row["status"],
            idempotency_key=row["idempotency_key"], fingerprint=row["fingerprint"],
            input_json=row.get("input"), options=_loads(row["options"], {}),
            created_at=row["created_at"], started_at=row["started_at"],
            finished_at=row["finished_at"], attempts=row["attempts"], last_seq=row["last_seq"],
            outcome=_loads(row["outcome"]), error=_loads(row["error"]),
            lease_holder=row["lease_holder"], lease_expires_at=row["lease_expires_at"],
            cancel_requested=bool(row["cancel_requested"]),
            compacted_at=row.get("compacted_at"), protocol_version=row.get("protocol_version"),
        )


@dataclass(frozen=True)
class InterruptRecord:
    """A durable request for human input (G7)."""

    tid: int
    id: str
    rid: int
    run_id: str
    body: dict[str, Any]
    expires_ts: float | None
    status: str
    answered_by: str | None
    answered_at: float | None
    resolution: dict[str, Any] | None
    continuation_rid: int | None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> InterruptRecord:
        return cls(
            tid=row["tid"], id=row["id"], rid=row["rid"], run_id=row["run_id"],
            body=_loads(row["body"], {}), expires_ts=row["expires_ts"], status=row["status"],
            answered_by=row["answered_by"], answered_at=row["answered_at"],
            resolution=_loads(row["resolution"]), continuation_rid=row["continuation_rid"],
        )


@dataclass(frozen=True)
class Snapshot:
    """The thread folded to a safe boundary, as of ``(as_of_run, as_of_seq)``."""

    messages: list[dict[str, Any]]
    positions: dict[str, float]
    state: Any
    session_state: dict[str, Any]
    as_of_run: str | None
    as_of_seq: int | None


@dataclass(frozen=True)
class ThreadView:
    """A thread as one consistent read: record, snapshot, pending interrupts, active runs."""

    thread: ThreadRecord
    snapshot: Snapshot
    interrupts: list[InterruptRecord]
    active: list[RunRecord]

    @property
    def current_run(self) -> RunRecord | None:
        """The run a reader follows: the running one, else the oldest queued."""
        running = [r for r in self.active if r.status == "running"]
        candidates = running or self.active
        return candidates[0] if candidates else None


class OpenAt(NamedTuple):
    """What a stream starting just after a seq must re-establish, read in one snapshot:
    the constructs open there (``(key, body)`` in opening order) and, when a state
    event comes at or before it, the state index's row (``(seq, upto, state)``) with
    the state events from its seq to the cursor that the state is folded through."""

    constructs: list[tuple[str, str]]
    state: tuple[int, int, str] | None
    state_events: list[StoredEvent]


class StoredEvent(NamedTuple):
    """One committed event: its ``seq``, whether the run was at a boundary after it, its JSON.

    A named tuple: the write path makes one per committed event."""

    seq: int
    boundary: bool
    body: str


@dataclass(frozen=True)
class ResumeAnswer:
    """One answer to a pending interrupt, as admitted."""

    interrupt_id: str
    status: Literal["resolved", "cancelled"]
    payload: Any = None


@dataclass
class AdmitRequest:
    """Everything admission needs, decided in one store transaction (G3)."""

    principal: str
    thread_id: str
    run_id: str
    agent: str
    key: str
    fingerprint: str
    input_json: str
    options_json: str
    multitask: Multitask
    resume: list[ResumeAnswer]
    has_new_input: bool
    title: str | None
    now: float
    protocol_version: str | None = None  # the input's protocolVersion, kept beside it
    # The input as parsed (``input_json``'s value), read within the transaction only:
    # starting the run there need not parse it again while holding the writer.
    input: Mapping[str, Any] | None = None
    # Lease queued runs to this instance in the same transaction (up to ``claim_limit``,
    # as ``claim_queued`` does), so that a new run starts without a second one.
    claim_instance: str | None = None
    claim_ttl: float = 0.0
    claim_limit: int = 0
    claim_start: bool = False  # and start them there, as ``claim_queued(start=True)`` does
    # spec §3 ``history_diverged``: for a new run, the thread's stored messages with the
    # ids of ``resent``, as ``(id, JSON)``, go to ``check_history``, which raises to
    # refuse the request.
    resent: list[str] = field(default_factory=list)
    check_history: Callable[[list[tuple[str, str]]], None] | None = None
    # Each answer goes, with the pending interrupt it answers (its wire body), to
    # ``check_answer``, which raises to refuse the request.
    check_answer: Callable[[dict[str, Any], ResumeAnswer], None] | None = None
    # The principal's limits (engine.limits.PrincipalLimits), checked for a new run.
    limits: Any = None


@dataclass(frozen=True)
class StartInput:
    """What admission knows of the run it admitted, so that starting it in the same
    transaction reads neither again: its input as parsed, and which of the input's
    messages (by id) its thread holds, when admission looked them up (None: it did not)."""

    input: Mapping[str, Any]
    held: frozenset[str] | None = None


@dataclass(frozen=True)
class AdmitResult:
    """The run a request is attached to, and whether admission created it."""

    run: RunRecord
    created: bool
    superseded: list[RunRecord] = field(default_factory=list)
    claimed: list[RunRecord] = field(default_factory=list)  # leased to the claim instance
    # The created run's RUN_STARTED when this admission started it: its stream begins
    # with it without reading the log.
    first: StoredEvent | None = None


@dataclass
class SnapshotWrite:
    """The part of a snapshot that changed at a boundary (never the whole transcript)."""

    as_of_run: str
    as_of_seq: int
    upserts: list[tuple[str, float, str]] = field(default_factory=list)  # id, position, json
    deletes: list[str] = field(default_factory=list)
    state_json: str | None = None
    session_state_json: str | None = None


@dataclass(frozen=True)
class WebhookWrite:
    """One delivery owed for a run's end (G12): recorded with the end, in its transaction."""

    id: str  # the webhook-id, stable across retries
    url: str
    type: str
    body: str
    expires_at: float


@dataclass
class FinishWrite:
    """How a run ends: final status, outcome, error, interrupts it raised, and the
    webhooks owed for it (G12: inserted in the same transaction)."""

    status: str
    outcome: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    interrupts: list[tuple[str, str, float | None]] = field(default_factory=list)  # id, json, exp
    webhooks: list[WebhookWrite] = field(default_factory=list)
    usage: list[dict[str, Any]] | None = None  # the run's tokens (AG-UI 1.0), for webhooks


@dataclass(slots=True)
class RunWrite:
    """One fenced unit of writing to one run: events, maybe a snapshot, maybe the end.
    Slotted: a commit at a model's pace makes one for each of hundreds of runs."""

    rid: int
    tid: int
    run_id: str
    attempt: int
    instance: str
    prev_seq: int
    events: list[StoredEvent] = field(default_factory=list)
    # The construct index's changes, in seq order: (seq, ord, key, body) for an opened
    # construct, (seq, ord, key, None) for a closed one. (Empty: a shared tuple; a
    # commit at a model's pace carries hundreds of writes, most with none.)
    constructs: Sequence[tuple[int, int, str, str | None]] = ()
    # The state index's entries, in seq order: (seq, the state just before that seq's
    # state event). The store keeps the first of a commit's, with the last one's seq.
    states: Sequence[tuple[int, Any]] = ()
    snapshot: SnapshotWrite | None = None
    finish: FinishWrite | None = None
    # Model calls' tokens since the last commit, as (unix time, usage), kept in the
    # ledger with these events.
    usage: Sequence[tuple[float, UsageRecord]] = ()


@dataclass(frozen=True)
class LeaseState:
    """A lease this instance still holds, with the run's cancel flag."""

    rid: int
    attempt: int
    cancel_requested: bool


@dataclass(frozen=True)
class EffectRecord:
    """The journal entry of one side effect (G9)."""

    key: str
    attempt: int
    status: str
    result: Any


@dataclass(frozen=True)
class UsageRecord:
    """Tokens of one model call (in a write), or summed (in a read), for one provider
    and model; ``key`` names the group of a summary (a thread id), ``calls`` counts the
    model calls summed."""

    provider: str | None
    model: str | None
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    reasoning_tokens: int = 0
    cached_tokens: int = 0
    calls: int = 1
    key: str | None = None

    @classmethod
    def from_row(cls, row: Mapping[str, Any], key: str | None = None) -> UsageRecord:
        return cls(provider=row.get("provider"), model=row.get("model"),
                   input_tokens=int(row["input_tokens"] or 0),
                   output_tokens=int(row["output_tokens"] or 0),
                   total_tokens=int(row["total_tokens"] or 0),
                   reasoning_tokens=int(row["reasoning_tokens"] or 0),
                   cached_tokens=int(row["cached_tokens"] or 0),
                   calls=int(row["calls"] or 0), key=key)


@dataclass(frozen=True)
class WebhookRecord:
    """A delivery of the outbox (G12): what to send, and how its attempts went."""

    wid: int
    rid: int | None
    id: str
    url: str
    type: str
    body: str
    created_at: float
    expires_at: float
    status: str  # pending, delivered, expired
    attempts: int
    next_at: float
    lease_holder: str | None
    last_status: int | None
    last_error: str | None
    delivered_at: float | None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> WebhookRecord:
        return cls(
            wid=row["wid"], rid=row["rid"], id=row["id"], url=row["url"], type=row["type"],
            body=row["body"], created_at=row["created_at"], expires_at=row["expires_at"],
            status=row["status"], attempts=row["attempts"], next_at=row["next_at"],
            lease_holder=row["lease_holder"], last_status=row["last_status"],
            last_error=row["last_error"], delivered_at=row["delivered_at"],
        )


@dataclass(frozen=True)
class ThreadPage:
    """One page of a principal's threads, and the opaque cursor of the next (None at the end)."""

    threads: list[ThreadRecord]
    next_cursor: str | None


@dataclass
class ForkWrite:
    """A new thread branched off another at a boundary: its snapshot and where it came
    from (spec §3 ``POST /threads/{id}/fork``)."""

    principal: str
    thread_id: str
    title: str | None
    messages: list[dict[str, Any]]
    state: Any
    session_state: dict[str, Any]
    forked_from: dict[str, Any]
    interrupts: list[InterruptRecord]  # pending at the fork point; they follow it
    now: float


@dataclass(frozen=True)
class Freed:
    """What retention removed (or would): runs compacted, their events, and the bytes
    of those events' bodies (UTF-8)."""

    runs: int = 0
    events: int = 0
    bytes: int = 0

    def __add__(self, other: Freed) -> Freed:
        return Freed(self.runs + other.runs, self.events + other.events,
                     self.bytes + other.bytes)
