"""What the HTTP edge asks of the engine besides admission and cancel: reads by public
id, the live feed of a subscriber, deletes and forks.

The edge names threads and runs by their public ids; internal keys (rid, tid) and the
store stay behind these methods. ``Engine`` inherits them.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from outlast.engine import fork as forks
from outlast.engine.hub import Hub, RunFeed
from outlast.engine.metrics import Metrics
from outlast.errors import InterruptNotPending, InvalidRequest, RunNotFound, ThreadNotFound
from outlast.protocol.state import state_after
from outlast.store.base import (
    FINAL,
    ForkWrite,
    InterruptRecord,
    RunRecord,
    Store,
    StoredEvent,
    ThreadRecord,
    ThreadView,
    UsageRecord,
    WebhookRecord,
)


class EdgeReads:
    """The engine's methods for the HTTP edge (a base of ``Engine``)."""

    store: Store
    hub: Hub
    metrics: Metrics

    async def ping(self) -> None:
        """Raise if the store does not answer (readiness)."""
        await self.store.ping()

    async def run(self, principal: str, run_id: str) -> RunRecord:
        """A run of ``principal``; RunNotFound otherwise (existence never leaks)."""
        run = await self.store.get_run(principal, run_id)
        if run is None:
            raise RunNotFound("run not found", runId=run_id)
        return run

    async def reread(self, run: RunRecord) -> RunRecord | None:
        """The run's record as stored now (None once its thread is deleted), for a
        reader following its progress: without its input, which such a reader holds
        for as long as it follows and never needs."""
        current = await self.store.get_run_by_rid(run.rid)
        return None if current is None else current.without_input()

    async def run_interrupts(self, run: RunRecord) -> list[InterruptRecord]:
        """The interrupts ``run`` raised, with their durable status (G7)."""
        return await self.store.interrupts(rid=run.rid)

    async def run_webhooks(self, run: RunRecord) -> list[WebhookRecord]:
        """The webhooks ``run``'s end owes, with how their delivery goes (G12)."""
        return await self.store.webhooks_for_run(run.rid)

    async def run_usage(self, run: RunRecord) -> list[UsageRecord]:
        """The tokens ``run`` spent over its attempts, per provider and model."""
        return await self.store.usage_for_run(run.rid)

    async def usage(self, principal: str, since: float, until: float, *,
                    threads: int) -> tuple[list[UsageRecord], list[UsageRecord]]:
        """A principal's tokens in ``[since, until)``, per model and per thread."""
        return await self.store.usage_summary(principal, since, until, threads=threads)

    async def run_events(self, run: RunRecord, after: int, limit: int) -> list[StoredEvent]:
        """A page of the run's log after ``after``."""
        return await self.store.read_events(run.rid, after, limit)

    async def run_frames(self, run: RunRecord, after: int, limit: int,
                         template: tuple[str, str, str]) -> tuple[int, str]:
        """A page of the run's log as frames assembled by the database, spelled by
        ``template`` (prefix, separator, suffix), with the page's last seq."""
        return await self.store.read_frames(run.rid, after, limit, template)

    async def open_at(self, run: RunRecord, after: int) -> tuple[list[tuple[str, str]],
                                                                   bool, Any]:
        """What a stream starting just after ``after`` re-establishes, from the log's
        indexes in one read: the constructs open there (``protocol.constructs.decode``
        reads them), whether a state event came at or before it, and the run's state
        then (the index's row with at most its span of events folded in)."""
        found = await self.store.open_at(run.rid, after)
        if found.state is None:
            return found.constructs, False, None
        state = state_after(json.loads(found.state[2]),
                            (json.loads(e.body) for e in found.state_events))
        return found.constructs, True, state

    @staticmethod
    def is_final(run: RunRecord) -> bool:
        """True once the run can change no more."""
        return run.status in FINAL

    @contextlib.asynccontextmanager
    async def watch(self, run: RunRecord) -> AsyncIterator[RunFeed]:
        """The run's live feed, held for one subscriber (G10: nothing is kept per
        subscriber, and the feed goes with its last holder)."""
        self.metrics.subscribers.inc()
        try:
            with self.hub.watch(run.rid) as feed:
                yield feed
        finally:
            self.metrics.subscribers.dec()

    async def thread_view(self, principal: str, thread_id: str) -> ThreadView | None:
        """Record, snapshot, pending interrupts and active runs in one read (G5)."""
        return await self.store.thread_view(principal, thread_id)

    async def threads(self, principal: str, status: str | None, limit: int,
                      cursor: str | None) -> tuple[list[ThreadRecord], str | None]:
        """A page of the principal's threads, newest first, and the cursor of the next.

        The cursor is opaque and principal-scoped: the store makes and checks it."""
        page = await self.store.list_threads(principal, status, limit, cursor or None)
        return page.threads, page.next_cursor

    async def thread_runs(self, principal: str, thread_id: str, limit: int,
                          before: str | None) -> list[RunRecord]:
        """A page of a thread's runs, newest first, older than the run ``before``."""
        thread = await self.store.get_thread(principal, thread_id)
        if thread is None:
            raise ThreadNotFound("thread not found", threadId=thread_id)
        before_rid = None
        if before:
            anchor = await self.store.get_run(principal, before)
            if anchor is None or anchor.tid != thread.tid:
                raise InvalidRequest("before must be a runId of this thread")
            before_rid = anchor.rid
        return await self.store.list_runs(thread.tid, limit, before_rid)

    async def delete_thread(self, principal: str, thread_id: str) -> None:
        """Delete a thread with its runs and events; ThreadBusy while a run is active."""
        await self.store.delete_thread(principal, thread_id)

    async def interrupted_run(self, principal: str, thread_id: str) -> RunRecord:
        """The run a resume continues, whose agent the continuation runs: the one that
        raised the pending interrupts; with none pending, the thread's latest run (a
        resent answer attaches to its continuation, G3; any other is refused by
        admission). ThreadNotFound, or InterruptNotPending for a thread without runs."""
        view = await self.store.thread_view(principal, thread_id)
        if view is None:
            raise ThreadNotFound("thread not found", threadId=thread_id)
        if view.interrupts:
            run = await self.store.get_run_by_rid(max(i.rid for i in view.interrupts))
        else:
            latest = await self.store.list_runs(view.thread.tid, 1, None)
            run = latest[0] if latest else None
        if run is None:
            raise InterruptNotPending("the thread has no pending interrupts to answer",
                                      threadId=thread_id)
        return run

    # -- fork -------------------------------------------------------------
    async def fork(self, principal: str, thread_id: str, *, new_id: str | None = None,
                   at: tuple[str, int] | None = None,
                   before_message_id: str | None = None) -> ThreadView:
        """Branch a thread at a safe boundary into a new thread of ``principal`` (spec §3):
        the snapshot there and the interrupts pending there, not the later runs. The
        original is untouched."""
        point = await forks.plan(self.store, principal, thread_id, at=at,
                                 before_message_id=before_message_id)
        original = await self.store.get_thread(principal, thread_id)
        if original is None:
            raise ThreadNotFound("thread not found", threadId=thread_id)
        new_id = new_id or str(uuid.uuid4())
        await self.store.fork_thread(ForkWrite(
            principal=principal, thread_id=new_id, title=original.title, messages=point.messages,
            state=point.state, session_state=point.session_state,
            forked_from=point.forked_from, interrupts=point.interrupts, now=time.time()))
        view = await self.store.thread_view(principal, new_id)
        assert view is not None
        return view
