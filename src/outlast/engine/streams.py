"""What a subscriber reads: replay from the log, then the live edge (SPEC §4).

Frames are ``id: <seq>`` + ``data: <event JSON>``; synthesized frames (the
``RUN_STARTED`` of a stream that starts mid-run, re-opened constructs, the
hydration snapshots) carry no id. Subscribers pull: nothing is buffered per
subscriber (G10).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from outlast.engine.runtime import Engine
from outlast.protocol.fold import ThreadFold
from outlast.protocol.jsonutil import dumps
from outlast.store.base import FINAL, RunRecord, StoredEvent, ThreadView

PAGE = 1000
REPLAY_PAGE = 2000  # pages of frames assembled by the database
FIRST_PAGE = 100  # small, so a client that reattaches mid-log gets its first event sooner
RETRY_MS = 1000
# How the database renders a replay page: id: <seq>, data: <event> (SPEC §4).
SSE_TEMPLATE = ("id: ", "\ndata: ", "\n\n")


def frame(seq: int | None, body: str) -> str:
    """One SSE frame."""
    if seq is None:
        return f"data: {body}\n\n"
    return f"id: {seq}\ndata: {body}\n\n"


def legacy_body(body: str) -> str:
    """AG-UI before 1.0 knows no cancelled outcome: it gets ``RUN_ERROR`` code ``cancelled``."""
    if '"RUN_FINISHED"' in body and '"cancelled"' in body:
        data = json.loads(body)
        if (data.get("outcome") or {}).get("type") == "cancelled":
            return dumps({"type": "RUN_ERROR", "message": "The run was cancelled.",
                          "code": "cancelled", "timestamp": data.get("timestamp")})
    return body


def is_legacy(protocol_version: str | None) -> bool:
    """True for clients that declared no protocol version, or one before 1.0."""
    if not protocol_version:
        return True
    try:
        return int(protocol_version.split(".")[0]) < 1
    except ValueError:
        return False


class RunStream:
    """Replays a run's log after a seq and follows it live until its final event."""

    def __init__(self, engine: Engine, run: RunRecord, *, legacy: bool) -> None:
        self.engine = engine
        self.run = run
        self.legacy = legacy

    def _encode(self, events: list[StoredEvent]) -> str:
        if self.legacy:
            return "".join(frame(e.seq, legacy_body(e.body)) for e in events)
        return "".join(f"id: {e.seq}\ndata: {e.body}\n\n" for e in events)

    async def reopen(self, after: int) -> list[str]:
        """Synthesized frames for a stream that starts after ``after`` (mid-run)."""
        out = [frame(None, dumps({"type": "RUN_STARTED", "threadId": self.run.thread_id,
                                  "runId": self.run.id, "protocolVersion": "1.0"}))]
        if after <= 0:
            return out
        start = await self.engine.store.last_boundary(self.run.rid, after)
        if start < after:
            fold = ThreadFold()
            cursor = start
            while cursor < after:
                page = await self.engine.store.read_events(self.run.rid, cursor,
                                                           min(PAGE, after - cursor))
                if not page:
                    break
                for ev in page:
                    fold.apply(json.loads(ev.body))
                cursor = page[-1].seq
            out.extend(frame(None, dumps(e)) for e in fold.reopen_events())
        return out

    async def frames(self, after: int, *, follow: bool = True,
                     synthesize_start: bool | None = None) -> AsyncIterator[str]:
        """Frames after ``after``; ends with the run's final event (or at the live edge
        when ``follow`` is false)."""
        engine = self.engine
        rid = self.run.rid
        feed = engine.hub.feed(rid)
        feed.watchers += 1
        engine.metrics.subscribers.inc()
        try:
            yield f"retry: {RETRY_MS}\n\n"
            run = await engine.store.get_run_by_rid(rid) or self.run
            final = run.status in FINAL
            last = max(run.last_seq, feed.last_seq)
            if synthesize_start if synthesize_start is not None else after > 0:
                for f in await self.reopen(min(after, last)):
                    yield f
            if final and after >= last:
                # Following a finished run from its end: its final event, at once.
                tail = await engine.store.read_events(rid, max(0, last - 1), 1)
                if tail:
                    body = legacy_body(tail[-1].body) if self.legacy else tail[-1].body
                    yield frame(None, body)
                return
            cursor = after
            poll = 1.0
            limit = FIRST_PAGE
            while True:
                cached = feed.cached_after(cursor, limit)
                if cached is None and not self.legacy:
                    # Replay from the log: the database assembles the page's frames.
                    upto, text = await engine.store.read_frames(rid, cursor, limit,
                                                              SSE_TEMPLATE)
                    limit = REPLAY_PAGE
                    if text:
                        cursor = upto
                        yield text
                        continue
                else:
                    page = cached if cached is not None else \
                        await engine.store.read_events(rid, cursor, limit)
                    limit = PAGE
                    if page:
                        cursor = page[-1].seq
                        yield self._encode(page)
                        continue
                if final and cursor >= last:
                    return
                if not follow:
                    return
                await feed.wait(cursor, poll)
                if feed.last_seq <= cursor and not feed.final:
                    # No wake-up: the log is the truth (hints can be lost across processes).
                    current = await engine.store.get_run_by_rid(rid)
                    if current is None:
                        return
                    last = current.last_seq
                    final = current.status in FINAL
                    if final and cursor >= last:
                        return
                else:
                    final = feed.final
                    last = feed.last_seq
        finally:
            feed.watchers -= 1
            engine.metrics.subscribers.dec()
            if feed.watchers == 0 and rid not in engine.executions:
                engine.hub.release(rid)


async def hydration_frames(engine: Engine, owner: str, view: ThreadView | None,
                           thread_id: str, run_id: str, *, legacy: bool) -> AsyncIterator[str]:
    """SPEC §3 hydration: the thread's snapshot, then its active run live, if any.

    Snapshot, interrupts and active run come from one consistent read (G5)."""
    yield f"retry: {RETRY_MS}\n\n"
    view = await _started(engine, owner, view)
    if view is None:
        yield frame(None, dumps({"type": "RUN_STARTED", "threadId": thread_id, "runId": run_id,
                                 "protocolVersion": "1.0"}))
        yield frame(None, dumps({"type": "STATE_SNAPSHOT", "snapshot": {}}))
        yield frame(None, dumps({"type": "MESSAGES_SNAPSHOT", "messages": []}))
        yield frame(None, dumps({"type": "RUN_FINISHED", "threadId": thread_id,
                                 "runId": run_id}))
        return
    active = view.current_run
    snap = view.snapshot
    head_run = active.id if active is not None else run_id
    yield frame(None, dumps({"type": "RUN_STARTED", "threadId": thread_id, "runId": head_run,
                             "protocolVersion": "1.0"}))
    yield frame(None, dumps({"type": "STATE_SNAPSHOT", "snapshot": snap.state}))
    yield frame(None, dumps({"type": "MESSAGES_SNAPSHOT", "messages": snap.messages}))
    if active is None:
        finished: dict[str, Any] = {"type": "RUN_FINISHED", "threadId": thread_id,
                                    "runId": run_id}
        if view.interrupts:
            finished["outcome"] = {"type": "interrupt",
                                   "interrupts": [i.body for i in view.interrupts]}
        yield frame(None, dumps(finished))
        return
    # The snapshot is as of a boundary of the active run (its first commit saves
    # one), where nothing is open: its events after that seq complete the picture.
    after = snap.as_of_seq if snap.as_of_run == active.id and snap.as_of_seq else 1
    stream = RunStream(engine, active, legacy=legacy)
    async for f in stream.frames(after, synthesize_start=False):
        if f.startswith("retry:"):
            continue
        yield f


async def _started(engine: Engine, owner: str, view: ThreadView | None) -> ThreadView | None:
    """The thread's view once its active run (if any) is running and has committed its
    first event, which saves the snapshot the hydration starts from."""
    while view is not None:
        current = view.current_run
        if current is None or (current.status == "running" and current.last_seq > 0):
            return view
        # Queued, or running without a first commit yet: wait briefly for its start.
        await engine.hub.feed(current.rid).wait(0, 0.25)
        view = await engine.store.thread_view(owner, view.thread.id)
    return None
