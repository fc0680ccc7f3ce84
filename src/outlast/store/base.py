"""The store interface: everything the engine persists goes through it.

Backends (``sqlite.py``, ``postgres.py``) implement it over the named queries
of ``sql/``; the conformance suite in ``tests/integration/test_store_conformance.py``
runs unchanged against each of them.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

from outlast.store.notifications import Notification

FINAL = ("interrupted", "succeeded", "failed", "cancelled")
Strategy = Literal["reject", "enqueue", "interrupt"]


def _loads(text: str | None, default: Any = None) -> Any:
    return default if text is None else json.loads(text)


@dataclass(frozen=True)
class ThreadRecord:
    """A conversation: its status and the coordinate its snapshot is as of."""

    tid: int
    owner: str
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
            tid=row["tid"], owner=row["owner"], id=row["id"], title=row["title"],
            status=row["status"], created_at=row["created_at"], updated_at=row["updated_at"],
            as_of_run=row["as_of_run"], as_of_seq=row["as_of_seq"],
            forked_from=_loads(row.get("forked_from")),
        )


@dataclass(frozen=True)
class RunRecord:
    """One admitted request executing one agent turn on a thread."""

    rid: int
    owner: str
    id: str
    tid: int
    thread_id: str
    agent: str
    status: str
    idempotency_key: str
    fingerprint: str
    input: dict[str, Any]
    options: dict[str, Any]
    created_at: float
    started_at: float | None
    finished_at: float | None
    attempts: int
    last_seq: int
    outcome: dict[str, Any] | None
    error: dict[str, Any] | None
    lease_owner: str | None
    lease_expires_at: float | None
    cancel_requested: bool
    # When retention removed its events (SPEC §6); None while they are kept.
    compacted_at: float | None = None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> RunRecord:
        return cls(
            rid=row["rid"], owner=row["owner"], id=row["id"], tid=row["tid"],
            thread_id=row["thread_id"], agent=row["agent"], status=row["status"],
            idempotency_key=row["idempotency_key"], fingerprint=row["fingerprint"],
            input=_loads(row["input"], {}), options=_loads(row["options"], {}),
            created_at=row["created_at"], started_at=row["started_at"],
            finished_at=row["finished_at"], attempts=row["attempts"], last_seq=row["last_seq"],
            outcome=_loads(row["outcome"]), error=_loads(row["error"]),
            lease_owner=row["lease_owner"], lease_expires_at=row["lease_expires_at"],
            cancel_requested=bool(row["cancel_requested"]),
            compacted_at=row.get("compacted_at"),
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

    owner: str
    thread_id: str
    run_id: str
    agent: str
    key: str
    fingerprint: str
    input_json: str
    options_json: str
    strategy: Strategy
    resume: list[ResumeAnswer]
    has_new_input: bool
    title: str | None
    now: float


@dataclass(frozen=True)
class AdmitResult:
    """The run a request is attached to, and whether admission created it."""

    run: RunRecord
    created: bool
    superseded: list[RunRecord] = field(default_factory=list)


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


@dataclass
class RunWrite:
    """One fenced unit of writing to one run: events, maybe a snapshot, maybe the end."""

    rid: int
    tid: int
    run_id: str
    attempt: int
    instance: str
    prev_seq: int
    events: list[tuple[int, bool, str]] = field(default_factory=list)  # seq, boundary, json
    # The construct index's changes, in seq order: (seq, ord, key, body) for an opened
    # construct, (seq, ord, key, None) for a closed one.
    constructs: list[tuple[int, int, str, str | None]] = field(default_factory=list)
    snapshot: SnapshotWrite | None = None
    finish: FinishWrite | None = None


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
    lease_owner: str | None
    last_status: int | None
    last_error: str | None
    delivered_at: float | None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> WebhookRecord:
        return cls(
            wid=row["wid"], rid=row["rid"], id=row["id"], url=row["url"], type=row["type"],
            body=row["body"], created_at=row["created_at"], expires_at=row["expires_at"],
            status=row["status"], attempts=row["attempts"], next_at=row["next_at"],
            lease_owner=row["lease_owner"], last_status=row["last_status"],
            last_error=row["last_error"], delivered_at=row["delivered_at"],
        )


@dataclass(frozen=True)
class ThreadPage:
    """One page of an owner's threads, and the opaque cursor of the next (None at the end)."""

    threads: list[ThreadRecord]
    next_cursor: str | None


@dataclass
class ForkWrite:
    """A new thread branched off another at a boundary: its snapshot and where it came
    from (SPEC §3 ``POST /threads/{id}/fork``)."""

    owner: str
    thread_id: str
    title: str | None
    messages: list[dict[str, Any]]
    state: Any
    session_state: dict[str, Any]
    forked_from: dict[str, Any]
    interrupts: list[InterruptRecord]  # pending at the fork point; they follow it
    now: float


Listener = Callable[[Notification], Awaitable[None] | None]


class Store(ABC):
    """Persistence for threads, runs, events, snapshots, interrupts and effects."""

    @property
    @abstractmethod
    def exclusive(self) -> bool:
        """True when holding this store open proves no other process uses it (SQLite's
        data-directory lock): runs leased by a predecessor are taken over at once and
        notifications stay in-process. False when processes share it (PostgreSQL):
        foreign leases are taken over only after their TTL (G8)."""

    @abstractmethod
    async def open(self) -> None:
        """Connect and apply pending migrations."""

    @abstractmethod
    async def close(self) -> None:
        """Release connections."""

    @abstractmethod
    async def ping(self) -> None:
        """Raise if the store is unreachable."""

    # -- admission -------------------------------------------------------
    @abstractmethod
    async def admit(self, req: AdmitRequest) -> AdmitResult:
        """Admit a run or attach to the one of the same key, atomically."""

    # -- reads -----------------------------------------------------------
    @abstractmethod
    async def get_thread(self, owner: str, thread_id: str) -> ThreadRecord | None:
        """A thread of this owner, or None."""

    @abstractmethod
    async def list_threads(
        self, owner: str, status: str | None, limit: int, cursor: str | None
    ) -> ThreadPage:
        """A page of the owner's threads, newest first, after ``cursor`` (a
        ``next_cursor`` this store returned to the same owner; InvalidRequest if not)."""

    @abstractmethod
    async def get_snapshot(self, tid: int) -> Snapshot:
        """A thread's latest snapshot."""

    @abstractmethod
    async def thread_view(self, owner: str, thread_id: str) -> ThreadView | None:
        """A thread's record, snapshot, pending interrupts and active runs, read in one
        transaction so that they agree with each other (G5)."""

    @abstractmethod
    async def delete_thread(self, owner: str, thread_id: str) -> None:
        """Delete a thread and everything in it; ThreadBusy while a run is active."""

    @abstractmethod
    async def get_run(self, owner: str, run_id: str) -> RunRecord | None:
        """A run of this owner, or None."""

    @abstractmethod
    async def get_run_by_rid(self, rid: int) -> RunRecord | None:
        """A run by internal key."""

    @abstractmethod
    async def list_runs(self, tid: int, limit: int, before_rid: int | None) -> list[RunRecord]:
        """A thread's runs, newest first."""

    @abstractmethod
    async def active_runs(self, tid: int) -> list[RunRecord]:
        """A thread's queued and running runs, oldest first."""

    @abstractmethod
    async def read_events(self, rid: int, after: int, limit: int) -> list[StoredEvent]:
        """A page of a run's log, after ``after``."""

    @abstractmethod
    async def read_frames(
        self, rid: int, after: int, limit: int, template: tuple[str, str, str]
    ) -> tuple[int, str]:
        """A page of a run's log rendered by the database, each event as
        ``template[0] + str(seq) + template[1] + body + template[2]``, concatenated;
        with the last seq in it (``after`` when the page is empty). The caller owns
        the format: the store knows nothing of the wire it is for."""

    @abstractmethod
    async def last_boundary(self, rid: int, upto: int) -> int:
        """The latest boundary seq at or before ``upto`` (0 if none)."""

    @abstractmethod
    async def open_constructs(self, rid: int, after: int) -> list[tuple[str, str]]:
        """``(key, body)`` of the constructs open just after ``after``, in opening order;
        costs what is open there, not what the log holds before it (SPEC §4)."""

    @abstractmethod
    async def interrupts(
        self, *, tid: int | None = None, rid: int | None = None, pending: bool = False
    ) -> list[InterruptRecord]:
        """Interrupts of a thread or raised by a run, in the order raised; only the
        pending ones with ``pending``."""

    @abstractmethod
    async def resolved_by(self, rid: int) -> list[InterruptRecord]:
        """The interrupts a continuation run answered."""

    # -- leases ----------------------------------------------------------
    @abstractmethod
    async def claim_queued(self, instance: str, ttl: float, limit: int) -> list[RunRecord]:
        """Lease startable queued runs to ``instance`` (one atomic statement)."""

    @abstractmethod
    async def claim_expired(
        self, instance: str, ttl: float, limit: int, all_foreign: bool = False
    ) -> list[RunRecord]:
        """Take over running runs whose lease expired."""

    @abstractmethod
    async def renew_leases(self, instance: str, ttl: float,
                           rids: list[int] | None = None) -> list[LeaseState]:
        """Extend this instance's leases (only those of ``rids`` when given); what comes
        back is what it still holds."""

    @abstractmethod
    async def release_lease(self, rid: int, instance: str, attempt: int) -> None:
        """Give up a lease so another process can resume the run at once."""

    @abstractmethod
    async def expire_lease(self, rid: int, instance: str, attempt: int) -> None:
        """Give up a lease after a failure; the attempt counts (unlike ``release_lease``)."""

    # -- writing runs ----------------------------------------------------
    @abstractmethod
    async def write(self, batch: list[RunWrite]) -> set[int]:
        """Commit a batch of run writes in one transaction; return the rids fenced off."""

    @abstractmethod
    async def request_cancel(self, rid: int) -> RunRecord | None:
        """Flag an active run for cancellation; the record after the change."""

    @abstractmethod
    async def cancel_queued(self, rid: int, events: list[str], outcome: dict[str, Any],
                            webhooks: Sequence[WebhookWrite] = ()) -> bool:
        """End a run that never started as cancelled, with its events and the webhooks
        owed for it (G12); False if it started."""

    # -- effects ---------------------------------------------------------
    @abstractmethod
    async def effect_get(self, rid: int, key: str) -> EffectRecord | None:
        """An effect's journal entry."""

    @abstractmethod
    async def effect_start(self, rid: int, key: str, instance: str, attempt: int) -> None:
        """Journal an effect as started (fenced: LeaseLost if not the holder)."""

    @abstractmethod
    async def effect_complete(
        self, rid: int, key: str, instance: str, attempt: int, result_json: str
    ) -> None:
        """Journal an effect's result (fenced)."""

    # -- upkeep ----------------------------------------------------------
    @abstractmethod
    async def prune(self, idempotency_before: float) -> None:
        """Drop idempotency records past their retention (events: ``compact``)."""

    # -- notifications (hints; the log stays the source of truth) ---------
    @abstractmethod
    def add_listener(self, listener: Listener) -> None:
        """Call ``listener(notification)`` for every notification, from any process."""

    @abstractmethod
    async def notify(self, notification: Notification) -> None:
        """Send a hint to every listener of every process sharing this store."""

    # -- webhooks (G12) ----------------------------------------------------
    @abstractmethod
    async def webhook_claim(self, instance: str, lease_until: float,
                            limit: int) -> list[WebhookRecord]:
        """Lease due deliveries to ``instance`` until ``lease_until`` and count the attempt,
        in one atomic statement: no two processes hold the same delivery. Due ones past
        their expiry come back ``expired`` and unleased instead."""

    @abstractmethod
    async def webhook_settle(self, wid: int, instance: str, attempt: int, *, status: str,
                             next_at: float, last_status: int | None,
                             last_error: str | None) -> bool:
        """Record an attempt's end (``delivered``, ``pending`` again from ``next_at``, or
        ``expired``); False, changing nothing, if ``instance`` no longer holds that attempt."""

    @abstractmethod
    async def webhook_release(self, instance: str, *, others: bool = False) -> None:
        """Make in-flight deliveries due now: this instance's own, or with ``others``,
        every other instance's (only when ``exclusive`` proves them gone)."""

    @abstractmethod
    async def webhook_next_due(self) -> float | None:
        """When the earliest pending delivery is due; None when none is owed."""

    @abstractmethod
    async def webhooks_for_run(self, rid: int) -> list[WebhookRecord]:
        """A run's deliveries, in the order they were recorded."""

    # -- fork ------------------------------------------------------------
    @abstractmethod
    async def fork_thread(self, fork: ForkWrite) -> ThreadRecord:
        """Create a thread holding ``fork``'s snapshot, in one transaction;
        ThreadIdConflict when the owner has a thread of that id already."""

    @abstractmethod
    async def fork_base(self, tid: int) -> tuple[list[dict[str, Any]], Any] | None:
        """The messages and state a fork started from; None for a thread that is no fork."""

    @abstractmethod
    async def runs_upto(self, tid: int, rid: int) -> list[RunRecord]:
        """A thread's runs up to and including ``rid``, in the order they ran."""

    # -- retention (SPEC §6) ------------------------------------------------
    @abstractmethod
    async def compact(self, before: float, now: float, max_runs: int,
                      max_events: int) -> Freed | None:
        """One batch of retention, in one short transaction: remove the events of up
        to ``max_runs`` runs final since before ``before`` (about ``max_events`` events
        at most; a longer log goes over several batches) and mark the runs compacted at
        ``now``. What it freed, or None when nothing is left to do."""

    @abstractmethod
    async def compactable(self, before: float) -> Freed:
        """What compacting every run final since before ``before`` would free; changes
        nothing (``outlast gc --dry-run``)."""

    @abstractmethod
    async def reclaim(self) -> None:
        """Give space freed by ``compact`` back, a bounded amount per call, without
        holding writers up for long."""


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
