"""Forks: a thread's snapshot at a safe boundary, as the start of a new thread.

The thread row holds only the latest snapshot. An older boundary ``(runId, seq)`` is
rebuilt by folding the thread's run logs up to it, in the order the runs ran (a
thread runs one at a time), onto what the thread started from: nothing, or for a
fork its base. Each run's log starts with ``RUN_STARTED`` echoing its new input
messages, so the fold holds the whole conversation. ``session_state`` is kept only
for the latest boundary (older ones are not in any log); see docs/contract-notes.md.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from outlast.errors import ForkPointCompacted, InvalidRequest, ThreadNotFound
from outlast.protocol.fold import ThreadFold
from outlast.store.base import InterruptRecord, RunRecord, Store, ThreadRecord

PAGE = 1000


@dataclass(frozen=True)
class ForkPoint:
    """What a fork starts from: the snapshot at a boundary and where it is."""

    messages: list[dict[str, Any]]
    state: Any
    session_state: dict[str, Any]
    forked_from: dict[str, Any]
    interrupts: list[InterruptRecord]


async def plan(store: Store, principal: str, thread_id: str, *,
               at: tuple[str, int] | None = None,
               before_message_id: str | None = None) -> ForkPoint:
    """The fork point a request names: ``at`` (runId, seq), just before a message, or
    (neither) the latest boundary."""
    if at is not None and before_message_id is not None:
        raise InvalidRequest("give asOf or beforeMessageId, not both", field="asOf")
    if before_message_id is not None:
        return await before_message(store, principal, thread_id, before_message_id)
    if at is not None:
        return await as_of(store, principal, thread_id, at[0], at[1])
    return await latest(store, principal, thread_id)


async def _events(store: Store, run: RunRecord, upto: int) -> list[dict[str, Any]]:
    """A run's events 1..``upto``; ForkPointCompacted when retention removed them."""
    out: list[dict[str, Any]] = []
    after = 0
    while after < upto:
        page = await store.read_events(run.rid, after, min(PAGE, upto - after))
        if not page or page[0].seq != after + 1:
            raise ForkPointCompacted(
                f"the events of run {run.id!r} were removed by retention; only the "
                "thread's latest boundary can be forked", runId=run.id)
        out.extend(json.loads(e.body) for e in page)
        after = page[-1].seq
    return out


async def _base(store: Store, thread: ThreadRecord) -> ThreadFold:
    """The fold of what the thread started from (a fork's base, else nothing)."""
    base = await store.fork_base(thread.tid)
    return ThreadFold() if base is None else ThreadFold(base[0], base[1], copy=False)


async def _fold_upto(store: Store, thread: ThreadRecord, run: RunRecord | None,
                     seq: int) -> ThreadFold:
    """The thread folded to ``seq`` of ``run`` (None: what it started from)."""
    fold = await _base(store, thread)
    if run is None:
        return fold
    for r in await store.runs_upto(thread.tid, run.rid):
        for event in await _events(store, r, seq if r.rid == run.rid else r.last_seq):
            fold.apply(event)
    return fold


async def _pending_at(store: Store, run: RunRecord | None, seq: int) -> list[InterruptRecord]:
    """Interrupts pending at a boundary: those of a run that ended there interrupted
    (the next run on the thread answers them all, or is refused)."""
    if run is None or run.status != "interrupted" or seq != run.last_seq:
        return []
    return await store.interrupts(rid=run.rid)


def _origin(thread_id: str, run: RunRecord | None, seq: int | None) -> dict[str, Any]:
    return {"threadId": thread_id, "runId": None if run is None else run.id,
            "seq": None if run is None else seq}


async def latest(store: Store, principal: str, thread_id: str) -> ForkPoint:
    """The thread's latest boundary: its stored snapshot, session_state and pending
    interrupts, read in one transaction (works when old events were compacted)."""
    view = await store.thread_view(principal, thread_id)
    if view is None:
        raise ThreadNotFound("thread not found", threadId=thread_id)
    snap = view.snapshot
    return ForkPoint(snap.messages, snap.state, dict(snap.session_state),
                     {"threadId": thread_id, "runId": snap.as_of_run, "seq": snap.as_of_seq},
                     list(view.interrupts))


async def as_of(store: Store, principal: str, thread_id: str, run_id: str, seq: int) -> ForkPoint:
    """The boundary after event ``seq`` of run ``run_id`` of the thread."""
    thread = await store.get_thread(principal, thread_id)
    if thread is None:
        raise ThreadNotFound("thread not found", threadId=thread_id)
    if (thread.as_of_run, thread.as_of_seq) == (run_id, seq):
        point = await latest(store, principal, thread_id)
        if (point.forked_from["runId"], point.forked_from["seq"]) == (run_id, seq):
            return point  # still the latest: the stored snapshot, session_state included
    run = await store.get_run(principal, run_id)
    if run is None or run.tid != thread.tid:
        raise InvalidRequest("asOf.runId names no run of this thread", field="asOf.runId")
    if not 1 <= seq <= run.last_seq:
        raise InvalidRequest(f"asOf.seq must be a seq of run {run_id!r}: 1 to {run.last_seq}",
                             field="asOf.seq")
    event = await store.read_events(run.rid, seq - 1, 1)
    if not event:
        raise ForkPointCompacted(
            f"the events of run {run_id!r} were removed by retention; only the thread's "
            "latest boundary can be forked", runId=run_id)
    if not event[0].boundary:
        before = await store.last_boundary(run.rid, seq)
        raise InvalidRequest(
            f"seq {seq} of run {run_id!r} is not a safe boundary (something is open "
            f"there); the latest boundary before it is seq {before}",
            field="asOf.seq", boundaryBefore=before or None)
    fold = await _fold_upto(store, thread, run, seq)
    return ForkPoint(fold.messages, fold.state, {}, _origin(thread_id, run, seq),
                     await _pending_at(store, run, seq))


async def before_message(store: Store, principal: str, thread_id: str,
                         message_id: str) -> ForkPoint:
    """The boundary just before the message first appeared (for edit and regenerate:
    for a user message, the end of the run before the one whose input carried it)."""
    thread = await store.get_thread(principal, thread_id)
    if thread is None:
        raise ThreadNotFound("thread not found", threadId=thread_id)
    fold = await _base(store, thread)
    origin = {**_origin(thread_id, None, None), "beforeMessageId": message_id}
    for i, m in enumerate(fold.messages):
        if m.get("id") == message_id:
            # It came with the base this fork started from: keep what preceded it there.
            return ForkPoint(fold.messages[:i], fold.state, {}, origin, [])
    newest = await store.list_runs(thread.tid, 1, None)
    runs = await store.runs_upto(thread.tid, newest[0].rid) if newest else []
    boundary: tuple[RunRecord, int] | None = None
    for run in runs:
        page_after = 0
        while page_after < run.last_seq:
            page = await store.read_events(run.rid, page_after, PAGE)
            if not page or page[0].seq != page_after + 1:
                raise ForkPointCompacted(
                    f"the events of run {run.id!r} were removed by retention; "
                    "the message's fork point cannot be rebuilt", runId=run.id)
            for ev in page:
                fold.apply(json.loads(ev.body))
                # Cheap first: only an event that spells the id can introduce it.
                if message_id in ev.body and any(
                        m.get("id") == message_id for m in fold.messages):
                    return await _before(store, thread, boundary, origin)
                if ev.boundary:
                    boundary = (run, ev.seq)
            page_after = page[-1].seq
    raise InvalidRequest("beforeMessageId names no message of this thread",
                         field="beforeMessageId")


async def _before(store: Store, thread: ThreadRecord, boundary: tuple[RunRecord, int] | None,
                  origin: dict[str, Any]) -> ForkPoint:
    run, seq = boundary if boundary is not None else (None, 0)
    fold = await _fold_upto(store, thread, run, seq)
    if run is not None:
        origin = {**origin, "runId": run.id, "seq": seq}
    return ForkPoint(fold.messages, fold.state, {}, origin, await _pending_at(store, run, seq))
