"""The store interface: everything the engine persists goes through it.

Backends (``sqlite.py``, ``postgres.py``) implement it over the named queries
of ``sql/``; the conformance suite in ``tests/integration/test_store_conformance.py``
runs unchanged against each of them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from outlast.store.notifications import Notification
from outlast.store.outage import Report
from outlast.store.records import (
    FINAL,
    AdmitRequest,
    AdmitResult,
    EffectRecord,
    FinishWrite,
    ForkWrite,
    Freed,
    InterruptRecord,
    LeaseState,
    Multitask,
    OpenAt,
    ResumeAnswer,
    RunRecord,
    RunWrite,
    Snapshot,
    SnapshotWrite,
    StartInput,
    StoredEvent,
    ThreadPage,
    ThreadRecord,
    ThreadView,
    UsageRecord,
    WebhookRecord,
    WebhookWrite,
)

__all__ = [
    "FINAL",
    "AdmitRequest",
    "AdmitResult",
    "EffectRecord",
    "FinishWrite",
    "ForkWrite",
    "Freed",
    "InterruptRecord",
    "LeaseRenewer",
    "LeaseState",
    "Listener",
    "Multitask",
    "OpenAt",
    "ResumeAnswer",
    "RunRecord",
    "RunWrite",
    "Snapshot",
    "SnapshotWrite",
    "StartInput",
    "Store",
    "StoredEvent",
    "ThreadPage",
    "ThreadRecord",
    "ThreadView",
    "UsageRecord",
    "WebhookRecord",
    "WebhookWrite",
    "takeover_margin",
]

Listener = Callable[[Notification], Awaitable[None] | None]


MIN_MARGIN = 1.0
"""The least takeover margin, in seconds."""


def takeover_margin(ttl: float) -> float:
    """How long past a lease's expiry (by the store's clock) another process waits before
    it takes the run over: max(1 s, TTL / 4). The holder stops by its own deadline, up to
    one beat (TTL / 12) after it and a loop iteration or two for the cancel to land; the
    rest covers the rate at which clocks drift apart over a TTL (parts per million) and a
    busy loop. Expiries are set and compared by the database's clock (PostgreSQL's
    ``clock_timestamp()``), never by the processes', so their wall clocks need not agree;
    a step of the database host's clock forward by more than the margin does shorten
    every lease."""
    return max(MIN_MARGIN, ttl / 4)


class LeaseRenewer(ABC):
    """Renews leases on a connection of its own, from the one thread that calls it: a
    run's lease then does not wait for the event loop (an agent blocking it)."""

    @abstractmethod
    def renew(self, instance: str, ttl: float, rids: list[int]) -> list[LeaseState]:
        """``Store.renew_leases``, blocking the calling thread."""

    @abstractmethod
    def close(self) -> None:
        """Let go of the connection (from the thread that renewed)."""


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

    report_outage: Report | None = None
    """Set by the engine: told of every outage a write meets (``StorageFull``,
    ``StoreUnavailable``), and of every write that works (None)."""

    @abstractmethod
    async def ping(self) -> None:
        """Raise if the store is unreachable."""

    @abstractmethod
    async def probe_write(self) -> None:
        """One small write that changes nothing: raises ``StorageFull`` or
        ``StoreUnavailable`` while the store cannot write."""

    # -- admission -------------------------------------------------------
    @abstractmethod
    async def admit(self, req: AdmitRequest) -> AdmitResult:
        """Admit a run or attach to the one of the same key, atomically."""

    # -- reads -----------------------------------------------------------
    @abstractmethod
    async def get_thread(self, principal: str, thread_id: str) -> ThreadRecord | None:
        """A thread of this principal, or None."""

    @abstractmethod
    async def list_threads(
        self, principal: str, status: str | None, limit: int, cursor: str | None
    ) -> ThreadPage:
        """A page of the principal's threads, newest first, after ``cursor`` (a
        ``next_cursor`` this store returned to the same principal; InvalidRequest if not)."""

    @abstractmethod
    async def get_snapshot(self, tid: int) -> Snapshot:
        """A thread's latest snapshot."""

    @abstractmethod
    async def thread_view(self, principal: str, thread_id: str) -> ThreadView | None:
        """A thread's record, snapshot, pending interrupts and active runs, read in one
        transaction so that they agree with each other (G5)."""

    @abstractmethod
    async def delete_thread(self, principal: str, thread_id: str) -> None:
        """Delete a thread and everything in it; ThreadBusy while a run is active."""

    # A run read by any of these comes without its input (``input_json`` None): only
    # the claims that start a run read it.
    @abstractmethod
    async def get_run(self, principal: str, run_id: str) -> RunRecord | None:
        """A run of this principal, or None."""

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
        costs what is open there, not what the log holds before it (spec §4)."""

    @abstractmethod
    async def open_at(self, rid: int, after: int) -> OpenAt:
        """What a stream that starts just after ``after`` re-opens and the state it
        starts from (``open_constructs`` and ``state_mark``, with the events the state
        is folded through), in one snapshot: the cost of the index rows, not of the log."""

    @abstractmethod
    async def state_mark(self, rid: int, after: int) -> tuple[int, int, str] | None:
        """``(seq, upto, state)`` of the state index's latest row at or before ``after``:
        the state just before ``seq``, whose commit's state events end at ``upto``;
        None when no state event comes at or before ``after``."""

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
    async def claim_queued(self, instance: str, ttl: float, limit: int, *,
                           start: bool = False) -> list[RunRecord]:
        """Lease startable queued runs to ``instance`` (one atomic statement). With
        ``start``, also start in the same transaction each one provably at a boundary
        after it: its ``RUN_STARTED`` (echoing the input's messages the thread does not
        hold) is committed as seq 1 with the thread's snapshot as of it (G5), and its
        record says ``last_seq`` 1 (``sqlwrite.start_runs``; the others say 0)."""

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
    def lease_renewer(self) -> LeaseRenewer:
        """A renewer for a thread of its own (``engine.leases``)."""

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
    async def webhook_outlook(self) -> tuple[float | None, int]:
        """When the earliest pending delivery is due (None when none is owed), and how
        many deliveries are owed."""

    async def webhook_next_due(self) -> float | None:
        """When the earliest pending delivery is due; None when none is owed."""
        return (await self.webhook_outlook())[0]

    @abstractmethod
    async def webhooks_for_run(self, rid: int) -> list[WebhookRecord]:
        """A run's deliveries, in the order they were recorded."""

    # -- usage -----------------------------------------------------------
    @abstractmethod
    async def usage_for_run(self, rid: int) -> list[UsageRecord]:
        """A run's tokens over all its attempts, per provider and model."""

    @abstractmethod
    async def usage_total(self, principal: str, since: float, *, but: int = 0) -> int:
        """A principal's tokens since ``since`` (every process's committed calls), those of
        run ``but`` left out."""

    @abstractmethod
    async def usage_summary(self, principal: str, since: float, until: float, *,
                            threads: int = 100) -> tuple[list[UsageRecord], list[UsageRecord]]:
        """A principal's tokens in ``[since, until)``: per provider and model, and per thread
        (``key``; the ``threads`` largest)."""

    # -- fork ------------------------------------------------------------
    @abstractmethod
    async def fork_thread(self, fork: ForkWrite) -> ThreadRecord:
        """Create a thread holding ``fork``'s snapshot, in one transaction;
        ThreadIdConflict when the principal has a thread of that id already."""

    @abstractmethod
    async def fork_base(self, tid: int) -> tuple[list[dict[str, Any]], Any] | None:
        """The messages and state a fork started from; None for a thread that is no fork."""

    @abstractmethod
    async def runs_upto(self, tid: int, rid: int) -> list[RunRecord]:
        """A thread's runs up to and including ``rid``, in the order they ran."""

    # -- retention (spec §6) ------------------------------------------------
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
