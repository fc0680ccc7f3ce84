"""The write path of every run: group commit, then publish (G2).

Executions hand events to the writer without waiting; one task commits
everything pending in a single transaction, then publishes the committed
events to the hub. Waiting for a commit is explicit (``flush``) and happens
only where it matters: before a side effect, at a run's end, and when a
run's backlog passes the high-water mark.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from outlast.engine.hub import Hub
from outlast.engine.outages import OutageWatch
from outlast.errors import StoreUnavailable
from outlast.store.base import (
    FinishWrite,
    RunWrite,
    SnapshotWrite,
    Store,
    StoredEvent,
    UsageRecord,
)
from outlast.tracing import TRACING

log = logging.getLogger("outlast.writer")

NO_STATE: Any = object()
"""``append``'s ``state_before`` for an event that is no state event."""
BACKLOG = 300
"""About how many queued events the runs writing may hold between them, shared fairly:
a run whose backlog passes its share waits until the writer takes it into a commit.
It bounds memory (G10) and latency: an event waits about backlog / throughput before
its readers see it, so a deep share per run holds events back when many runs write,
while one run alone needs a deep backlog to fill large commits. Waiting for the take,
not the commit, keeps the agent producing while the writer commits."""
MIN_BACKLOG = 50
"""The least backlog a run may hold, however many runs write."""


def backlog_share(writing: int) -> int:
    """How many queued events each of ``writing`` runs may hold."""
    return max(MIN_BACKLOG, BACKLOG // max(1, writing))


COMMIT_EVENTS = 1000
"""About how many events one commit takes, shared fairly among the runs writing."""
MIN_SHARE = 64
"""The least a run writing gets into a commit, however many runs write."""
COMMIT_INTERVAL = 0.004
"""Seconds a commit starts after the previous one, at the soonest. Commits are sized by
latency: the first write after a quiet spell commits at once, but under a steady
trickle (many runs at a model's pace) events gather for this long, so that one commit
carries many runs' events instead of each event paying a transaction of its own."""


FIRST_RETRY = 0.05
MAX_RETRY = 0.5
"""Seconds between commit attempts while the store cannot write (doubling from the
first); a probe write (engine.outages) ends the wait as soon as the store writes."""
CLOSE_GRACE = 5.0
"""Seconds a shutdown keeps retrying an outage before leaving the writes unstored."""


def merge_snapshots(snapshots: Sequence[SnapshotWrite]) -> SnapshotWrite:
    """The boundary snapshots of one commit, oldest first: the last wins, changes
    accumulate. One pass at commit time (merging at every boundary instead costs
    quadratic time in the boundaries a busy run passes between two commits)."""
    if len(snapshots) == 1:
        return snapshots[0]
    upserts: dict[str, tuple[str, float, str]] = {}
    deletes: dict[str, None] = {}
    state_json = session_state_json = None
    for snap in snapshots:
        for i in snap.deletes:
            upserts.pop(i, None)
            deletes[i] = None
        for i, p, b in snap.upserts:
            deletes.pop(i, None)
            upserts[i] = (i, p, b)
        if snap.state_json is not None:
            state_json = snap.state_json
        if snap.session_state_json is not None:
            session_state_json = snap.session_state_json
    last = snapshots[-1]
    return SnapshotWrite(
        as_of_run=last.as_of_run,
        as_of_seq=last.as_of_seq,
        upserts=list(upserts.values()),
        deletes=list(deletes),
        state_json=state_json,
        session_state_json=session_state_json,
    )


@dataclass
class RunChannel:
    """One run's pending, uncommitted writes, owned by its execution."""

    rid: int
    tid: int
    run_id: str
    attempt: int
    instance: str
    committed_seq: int
    events: list[StoredEvent] = field(default_factory=list)
    constructs: list[tuple[int, int, str, str | None]] = field(default_factory=list)
    states: list[tuple[int, Any]] = field(default_factory=list)  # (seq, state before it)
    snapshots: list[SnapshotWrite] = field(default_factory=list)  # merged at commit
    finish: FinishWrite | None = None
    usage: list[tuple[float, UsageRecord]] = field(default_factory=list)  # model calls'
    fenced: bool = False
    waiters: list[asyncio.Future[None]] = field(default_factory=list)
    room_waiters: list[asyncio.Future[None]] = field(default_factory=list)
    inflight: bool = False  # writes taken into the commit in progress
    on_fenced: Callable[[], None] | None = None
    # Callbacks to run once everything up to their seq is committed, in seq order.
    committed_callbacks: list[tuple[int, Callable[[], None]]] = field(default_factory=list)

    @property
    def pending(self) -> bool:
        return bool(self.events) or bool(self.snapshots) or self.finish is not None \
            or bool(self.usage)


def _taken(ch: RunChannel) -> tuple[Sequence[tuple[int, int, str, str | None]],
                                    Sequence[tuple[int, Any]], Sequence[SnapshotWrite]]:
    """All of ``ch``'s construct changes, state entries and snapshots, its lists replaced
    only where they held something (an empty one is left in place: what the write
    carries is then a shared empty tuple, never a list the run appends to meanwhile)."""
    constructs: Sequence[tuple[int, int, str, str | None]] = ()
    states: Sequence[tuple[int, Any]] = ()
    snapshots: Sequence[SnapshotWrite] = ()
    if ch.constructs:
        constructs, ch.constructs = ch.constructs, []
    if ch.states:
        states, ch.states = ch.states, []
    if ch.snapshots:
        snapshots, ch.snapshots = ch.snapshots, []
    return constructs, states, snapshots


def _call(callback: Callable[[], None]) -> None:
    """Run a commit callback; its failure is logged, never the writer's."""
    try:
        callback()
    except Exception:
        log.exception("a commit callback failed")


class Writer:
    """Commits pending run writes in batches and publishes them once committed."""

    def __init__(self, store: Store, hub: Hub, on_commit: Callable[[list[RunWrite]], None],
                 on_batch: Callable[[float], None] | None = None,
                 outages: OutageWatch | None = None) -> None:
        self._store = store
        self._outages = outages or OutageWatch("the store", None)
        self._hub = hub
        self._on_commit = on_commit  # told each commit's writes, fenced ones left out
        self._on_batch = on_batch  # told each commit's duration (seconds)
        self._dirty: dict[int, RunChannel] = {}
        self._share_of, self._share = 0, backlog_share(0)  # high_water's last answer
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._closing_at = 0.0
        self._retry = FIRST_RETRY  # seconds before the next attempt during an outage

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="outlast-writer")

    async def stop(self) -> None:
        """Commit what is pending, then end the loop (during a store outage, after trying
        for ``CLOSE_GRACE`` seconds)."""
        self._closing = True
        self._closing_at = time.monotonic()
        self._wake.set()
        if self._task is not None:
            await self._task

    def channel(self, rid: int, tid: int, run_id: str, attempt: int, instance: str,
                committed_seq: int) -> RunChannel:
        """A write channel for one attempt of one run."""
        return RunChannel(rid, tid, run_id, attempt, instance, committed_seq)

    def append(self, ch: RunChannel, seq: int, boundary: bool, body: str,
               constructs: list[tuple[int, int, str, str | None]] | None = None,
               state_before: Any = NO_STATE) -> None:
        """Queue one event (and the constructs it opens or closes; for a state event,
        the state before it, never changed in place afterwards); it is published only
        after it commits."""
        if ch.fenced:
            return
        ch.events.append(StoredEvent(seq, boundary, body))
        if constructs:
            ch.constructs.extend(constructs)
        if state_before is not NO_STATE:
            ch.states.append((seq, state_before))
        self._mark(ch)

    def snapshot(self, ch: RunChannel, snap: SnapshotWrite) -> None:
        """Queue a boundary snapshot, committed with the events it is as of."""
        if ch.fenced:
            return
        ch.snapshots.append(snap)
        self._mark(ch)

    def usage(self, ch: RunChannel, usage: UsageRecord) -> None:
        """Queue a model call's tokens for the ledger, committed with the next write."""
        if ch.fenced:
            return
        ch.usage.append((time.time(), usage))
        self._mark(ch)

    def finish(self, ch: RunChannel, fin: FinishWrite) -> None:
        """Queue the end of a run."""
        if ch.fenced:
            return
        ch.finish = fin
        self._mark(ch)

    def after_commit(self, ch: RunChannel, seq: int, callback: Callable[[], None]) -> None:
        """Call ``callback`` once ``ch`` has committed everything up to ``seq`` (never for a
        channel that is fenced off first)."""
        if seq <= ch.committed_seq and not ch.fenced:
            _call(callback)  # committed already (a run its claim started, say)
            return
        ch.committed_callbacks.append((seq, callback))
        self._mark(ch)

    def pending_channels(self) -> int:
        """Channels with writes not yet taken by a commit."""
        return len(self._dirty)

    def high_water(self) -> int:
        """How many queued events a run writing may hold now."""
        writing = len(self._dirty)
        if writing != self._share_of:  # asked per event: worked out when the count moves
            self._share_of, self._share = writing, backlog_share(writing)
        return self._share

    def over_high_water(self, ch: RunChannel) -> bool:
        """True when ``ch`` holds more queued events than its share of the backlog."""
        return len(ch.events) > self.high_water()

    async def make_room(self, ch: RunChannel) -> None:
        """Wait until the writer has taken ``ch``'s backlog below its share into a commit
        (or fenced it off)."""
        if ch.fenced or not self.over_high_water(ch):
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        ch.room_waiters.append(fut)
        self._wake.set()
        await fut

    @staticmethod
    def _release_room(ch: RunChannel) -> None:
        waiters, ch.room_waiters = ch.room_waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    async def flush(self, ch: RunChannel) -> None:
        """Wait until everything queued on ``ch`` so far is committed (or fenced off),
        including what the commit in progress took."""
        if ch.fenced or not (ch.pending or ch.inflight):
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        ch.waiters.append(fut)
        if ch.pending:
            self._wake.set()
        await fut

    def _mark(self, ch: RunChannel) -> None:
        self._dirty[ch.rid] = ch
        self._wake.set()

    async def _loop(self) -> None:
        """Take what is pending, commit it, settle it; again, until stopped."""
        last_start = -COMMIT_INTERVAL
        while True:
            await self._wake.wait()
            self._wake.clear()
            if not self._dirty:
                if self._closing:
                    return
                continue
            due = last_start + COMMIT_INTERVAL - time.perf_counter()
            if due > 0 and not self._closing:
                await asyncio.sleep(due)  # what arrives meanwhile joins this commit
                self._wake.clear()
            last_start = time.perf_counter()
            channels, writes, waiters = self._take_batch()
            fenced = await self._commit_batch(channels, writes, waiters)
            if fenced is not None:
                self._settle_batch(channels, writes, waiters, fenced)

    def _take_batch(self) -> tuple[list[RunChannel], list[RunWrite],
                                   list[Sequence[asyncio.Future[None]]]]:
        """Take every dirty channel's next write into one commit, with the flushes it
        settles (a channel with more pending keeps its flushes for a later commit)."""
        channels = list(self._dirty.values())
        self._dirty.clear()
        # A commit's size is bounded so that it takes milliseconds, not a backlog's
        # worth of time: every run gets a fair share, and what is left over goes in
        # the next commit, right after this one (latency over batch size).
        share = max(MIN_SHARE, COMMIT_EVENTS // len(channels))
        writes: list[RunWrite] = []
        waiters: list[Sequence[asyncio.Future[None]]] = []
        high_water = backlog_share(len(channels))
        for ch in channels:
            writes.append(self._take(ch, share))
            ch.inflight = True
            if ch.room_waiters and len(ch.events) <= high_water:
                self._release_room(ch)  # the agent produces again while this commits
            if ch.waiters and not ch.pending:
                waiters.append(ch.waiters)
                ch.waiters = []
            else:  # none, or they wait for everything queued so far
                waiters.append(())
        return channels, writes, waiters

    async def _commit_batch(self, channels: list[RunChannel], writes: list[RunWrite],
                            waiters: list[Sequence[asyncio.Future[None]]]
                            ) -> set[int] | None:
        """Write one commit: the rids fenced off, or None when nothing of it is stored
        (put back to try again after an outage, or failed for good)."""
        started = time.perf_counter()
        try:
            with TRACING.commit(writes):
                fenced = await self._store.write(writes)
        except StoreUnavailable as exc:
            if not self._closing or time.monotonic() - self._closing_at < CLOSE_GRACE:
                # Nothing of this commit is stored; the store said so once (the
                # OutageWatch). Every run keeps its writes and its lease, and the
                # next attempt goes as soon as the store writes again (G2, G8).
                for ch, w, ws in zip(channels, writes, waiters, strict=True):
                    if ch.fenced:  # abandoned meanwhile: its lease ran out here
                        ch.inflight = False
                        self._settle([ws])
                    else:
                        self._put_back(ch, w, ws)
                await self._outages.wait_writable(self._retry)
                self._retry = min(self._retry * 2, MAX_RETRY)
                self._wake.set()
                return None
            log.error("%s; %d runs stop with their writes unstored (resumed from their "
                      "last boundary at the next start)", exc.message, len(writes))
            self._fail(channels, waiters, exc)
            return None
        except Exception as exc:  # the store failed: every waiter learns it
            log.exception("committing %d run writes failed", len(writes))
            self._fail(channels, waiters, exc)
            return None
        self._retry = FIRST_RETRY
        if self._on_batch is not None:
            self._on_batch(time.perf_counter() - started)
        return fenced

    def _settle_batch(self, channels: list[RunChannel], writes: list[RunWrite],
                      waiters: list[Sequence[asyncio.Future[None]]], fenced: set[int]) -> None:
        """After a commit: publish what it stored (G2), fence off the runs it did not
        store, run the callbacks and flushes it settles, and mark what is left."""
        committed: list[RunWrite] = []
        publish = self._hub.publish
        now = time.monotonic()
        for ch, w, ws in zip(channels, writes, waiters, strict=True):
            ch.inflight = False
            if ch.waiters and not ch.pending:  # flushes that came during the commit: done too
                ws = [*ws, *ch.waiters]
                ch.waiters = []
            if fenced and w.rid in fenced:
                # G8 fencing: another process owns this run now; write nothing more.
                ch.fenced = True
                self._release_room(ch)
                if ch.on_fenced is not None:
                    ch.on_fenced()
            else:
                if w.events:
                    ch.committed_seq = w.events[-1].seq
                # G2: publish only what is committed.
                publish(ch.rid, w.events, ch.committed_seq, w.finish is not None, now)
                committed.append(w)
                if ch.committed_callbacks:
                    self._run_committed(ch)
            if ws:
                self._settle([ws])
            if ch.pending and not ch.fenced:
                self._mark(ch)  # the rest of its backlog: next commit
        self._on_commit(committed)

    def abandon(self, ch: RunChannel) -> None:
        """The run's lease ran out in this process (``engine.leases``): what it has not
        written is dropped and nothing more is, as if fenced; its flushes return."""
        ch.fenced = True
        ch.events, ch.constructs, ch.states, ch.snapshots = [], [], [], []
        ch.finish, ch.usage, ch.committed_callbacks = None, [], []
        if self._dirty.get(ch.rid) is ch:
            del self._dirty[ch.rid]
        waiters, ch.waiters = ch.waiters, []
        self._settle([waiters])
        self._release_room(ch)

    @staticmethod
    def _settle(waiters: Sequence[Sequence[asyncio.Future[None]]]) -> None:
        for futures in waiters:
            for fut in futures:
                if not fut.done():
                    fut.set_result(None)

    def _fail(self, channels: list[RunChannel],
              waiters: list[Sequence[asyncio.Future[None]]], exc: Exception) -> None:
        """A commit that cannot be made: its runs stop writing, their waiters learn why."""
        for ch in channels:
            ch.inflight = False
            if not ch.pending:  # flushes that came during the commit
                waiters.append(ch.waiters)
                ch.waiters = []
        for futures in waiters:
            for fut in futures:
                if not fut.done():
                    fut.set_exception(exc)
        for ch in channels:
            ch.fenced = True
            self._release_room(ch)
            if ch.on_fenced is not None:
                ch.on_fenced()

    def _put_back(self, ch: RunChannel, w: RunWrite,
                  waiting: Sequence[asyncio.Future[None]]) -> None:
        """A write the store did not take goes back in front of what came since, its
        flushes still waiting."""
        ch.inflight = False
        ch.events[:0] = w.events
        ch.constructs[:0] = w.constructs
        ch.states[:0] = w.states
        if w.snapshot is not None:
            ch.snapshots.insert(0, w.snapshot)
        if w.finish is not None:
            ch.finish = w.finish
        ch.usage[:0] = w.usage  # the ledger's rows go with the events they came with
        ch.waiters[:0] = waiting
        self._dirty[ch.rid] = ch

    @staticmethod
    def _run_committed(ch: RunChannel) -> None:
        due = [cb for seq, cb in ch.committed_callbacks if seq <= ch.committed_seq]
        ch.committed_callbacks = [(s, cb) for s, cb in ch.committed_callbacks
                                  if s > ch.committed_seq]
        for callback in due:
            _call(callback)

    @staticmethod
    def _take(ch: RunChannel, share: int) -> RunWrite:
        """The next write of ``ch``: up to ``share`` events, with the snapshots, construct
        changes and end that belong to them (a snapshot goes with the events it is as
        of; the end only with the last of them)."""
        if len(ch.events) <= share and not (ch.usage or ch.constructs or ch.states
                                            or ch.snapshots or ch.finish):
            # The common case at a model's pace: a few events, nothing else.
            events, ch.events = ch.events, []
            return RunWrite(ch.rid, ch.tid, ch.run_id, ch.attempt, ch.instance,
                            ch.committed_seq, events)
        usage: Sequence[tuple[float, UsageRecord]] = ()
        if ch.usage:  # with the first write: it belongs to no seq
            usage, ch.usage = ch.usage, []
        if len(ch.events) <= share:  # all of it, the common case: nothing to split
            events, ch.events = ch.events, []
            constructs, states, snapshots = _taken(ch)
            finish, ch.finish = ch.finish, None
        else:
            events, ch.events = ch.events[:share], ch.events[share:]
            upto = events[-1][0]
            snapshots = [x for x in ch.snapshots if x.as_of_seq <= upto]
            ch.snapshots = [x for x in ch.snapshots if x.as_of_seq > upto]
            constructs = [c for c in ch.constructs if c[0] <= upto]
            ch.constructs = [c for c in ch.constructs if c[0] > upto]
            states = [s for s in ch.states if s[0] <= upto]
            ch.states = [s for s in ch.states if s[0] > upto]
            finish = None
        return RunWrite(
            rid=ch.rid, tid=ch.tid, run_id=ch.run_id, attempt=ch.attempt,
            instance=ch.instance, prev_seq=ch.committed_seq, events=events,
            constructs=constructs, states=states,
            snapshot=merge_snapshots(snapshots) if snapshots else None, finish=finish,
            usage=usage,
        )
