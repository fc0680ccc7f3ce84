"""What a subscriber reads: replay from the log, then the live edge (spec §4).

Frames are spelled by ``outlast.http.frames``; the events this module makes up
(the ``RUN_STARTED`` of a stream that starts mid-run, re-opened constructs, the
hydration snapshots) come from the builders of ``outlast.protocol.events``.
Subscribers pull: nothing is buffered per subscriber (G10).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from typing import TYPE_CHECKING, Any, TypeVar

from outlast.engine.leases import takeover_after
from outlast.errors import RunCompacted, StoreUnavailable
from outlast.http.frames import (
    SSE_TEMPLATE,
    frame,
    frames_of,
    is_preamble,
    retry_preamble,
    synthesized,
)
from outlast.protocol import constructs, events
from outlast.protocol.jsonutil import dumps

if TYPE_CHECKING:
    from outlast.engine.hub import RunFeed
    from outlast.engine.runtime import Engine
    from outlast.store.base import RunRecord, StoredEvent, ThreadView

log = logging.getLogger("outlast.http")

T = TypeVar("T")

PAGE = 1000
REPLAY_PAGE = 2000  # pages of frames assembled by the database
FIRST_PAGE = 100  # small, so a client that reattaches mid-log gets its first event sooner
OUTAGE_RETRY = 0.5
"""Seconds between a following stream's reads while the store does not answer."""


class _StoreGone(Exception):
    """The store did not answer for as long as a following stream waits for it."""


def is_legacy(protocol_version: str | None) -> bool:
    """True for a client before AG-UI 1.0: one that declares no version (inputs made
    before the protocol carried one), or a ``0.x`` one. A declaration that cannot be
    read is treated as a newer version, as AG-UI's versioning rules say."""
    if protocol_version is None or not protocol_version.strip():
        return True
    major = protocol_version.strip().split(".", 1)[0]
    # isascii: int() also reads other scripts' digits, which no version is spelled with.
    return major.isascii() and major.isdigit() and int(major) < 1


def legacy_body(body: str) -> str:
    """AG-UI before 1.0 knows no cancelled outcome: it gets ``RUN_ERROR`` code ``cancelled``
    (spec §3)."""
    if '"RUN_FINISHED"' in body and '"cancelled"' in body:
        data = json.loads(body)
        if (data.get("outcome") or {}).get("type") == "cancelled":
            return dumps(events.run_error("The run was cancelled.", "cancelled",
                                          timestamp=data.get("timestamp")))
    return body


async def replay_page(engine: Engine, run: RunRecord, after: int,
                      limit: int) -> tuple[int, str]:
    """A page of logged frames assembled by the database, spelled as ``frame`` spells them."""
    return await engine.run_frames(run, after, limit, SSE_TEMPLATE)


class RunStream:
    """Replays a run's log after a seq and follows it live until its final event."""

    def __init__(self, engine: Engine, run: RunRecord, *, legacy: bool,
                 first: StoredEvent | None = None) -> None:
        """Raises RunCompacted (410) for a run whose events retention removed: made
        before the response starts, so both ``GET /runs/{id}/events`` and a retried
        ``POST`` that attaches to such a run are refused, never served part of a log."""
        if run.compacted_at is not None:
            raise RunCompacted(
                f"the events of run {run.id!r} were removed by the retention policy "
                f"(--event-retention, outlast gc); its record (GET /runs/{run.id}) and "
                "its thread's snapshot remain", runId=run.id, compactedAt=run.compacted_at)
        self.engine = engine
        self.run = run.without_input()  # held as long as the stream: never needs it
        self.legacy = legacy
        self.first = first  # its first event, committed by the admission that made it
        # How long a following stream waits out a store outage: by then another process
        # may execute the run, and the client that reattaches there reads on.
        self.patience = takeover_after(engine.settings.lease_ttl)

    async def _patient(self, follow: bool, read: Callable[..., Awaitable[T]],
                       *args: Any) -> T:
        """``read(*args)``. A stream that follows waits out a store outage (its keepalives
        go on meanwhile) and reads again, or ends (``_StoreGone``) after ``patience``, a
        normal end its client reattaches after. One that does not follow raises: it serves
        the stored log whole or fails, never a part as the whole."""
        since: float | None = None
        while True:
            try:
                return await read(*args)
            except StoreUnavailable:
                if not follow:
                    raise
                now = time.monotonic()
                since = now if since is None else since
                if now - since >= self.patience:
                    raise _StoreGone from None
                await asyncio.sleep(OUTAGE_RETRY)

    def _encode(self, page: list[StoredEvent]) -> str:
        if self.legacy:
            return "".join([frame(e.seq, legacy_body(e.body)) for e in page])
        return frames_of(page)

    async def reopen(self, after: int, *, past_end: bool = False) -> list[str]:
        """Synthesized frames for a stream that starts after ``after`` (mid-run, or
        ``past_end`` of a final run, where nothing is open)."""
        out = [synthesized(events.run_started(self.run.thread_id, self.run.id))]
        if after <= 0:
            return out
        # The shared state as of ``after`` (from the log's state index), so the deltas
        # that follow apply to the base they were made on, whatever the client holds.
        # Before the re-opening events: like RUN_*, a snapshot closes chunk lanes.
        opened, stated, state = await self.engine.open_at(self.run, after)
        if stated:
            out.append(synthesized(events.state_snapshot(state)))
        if past_end:
            return out
        # spec §4: read what is open at ``after`` from the log's construct index, so a
        # reattach costs the same wherever it lands (no fold of the events before it).
        out.extend(synthesized(e) for e in
                   constructs.reopen_events(constructs.decode(opened)))
        return out

    async def frames(self, after: int, *, follow: bool = True,
                     synthesize_start: bool | None = None) -> AsyncIterator[str]:
        """Frames after ``after``; ends with the run's final event (or, when ``follow``
        is false, with the last event stored when the request was read). A following
        stream that the store leaves without an answer for ``patience`` ends early.
        Its pages come from ``_pages`` straight, one generator between the feed and the
        response (a stream wakes once per commit of its run)."""
        engine = self.engine
        async with engine.watch(self.run) as feed:
            yield retry_preamble()
            try:
                run = await self._current(feed, follow)
                if run.compacted_at is not None:
                    return  # compacted since the request was read: a retry gets the 410
                final = engine.is_final(run)
                last = max(run.last_seq, feed.last_seq)
                engine.metrics.streams.labels(
                    "reattach" if after > 0 else "replay" if final else "live").inc()
                if synthesize_start if synthesize_start is not None else after > 0:
                    # Past a final run's end nothing is open: only its state is sent.
                    past_end = final and after >= last
                    for f in await self._patient(follow, self._reopen, min(after, last),
                                                 past_end):
                        yield f
                if final and after >= last:
                    # Following a finished run from its end: its final event, at once.
                    tail = await self._patient(follow, engine.run_events, run,
                                               max(0, last - 1), 1)
                    if tail:
                        body = legacy_body(tail[-1].body) if self.legacy else tail[-1].body
                        yield frame(None, body)
                    return
                async with aclosing(self._pages(feed, run, after, last, final,
                                                follow)) as pages:
                    async for text in pages:
                        yield text
            except _StoreGone:
                log.warning("run %s: a stream ended: the store did not answer for %.0f s "
                            "(its client resumes with Last-Event-ID)", self.run.id,
                            self.patience)

    async def _current(self, feed: RunFeed, follow: bool) -> RunRecord:
        """The run as it stands now that the feed is held. A final run changes no more (a
        compaction since the request was read ends this stream early; a retry gets the
        410): only a live one is read again, so that no commit falls between the two. A
        run executing here needs no read: its execution publishes every commit to this
        feed from its start, and what came before is in the log read after."""
        engine, run = self.engine, self.run
        if not (engine.is_final(run) or engine.executes(run)):
            current = await self._patient(follow, engine.reread, run)
            run = current or run
            _catch_up(feed, run.last_seq, engine.is_final(run))
        return run

    async def _pages(self, feed: RunFeed, run: RunRecord, after: int, last: int, final: bool,
                     follow: bool) -> AsyncGenerator[str, None]:
        """The run's events after ``after``, page by page from the feed or the log, then
        (following) as they are committed, until the run's end."""
        engine = self.engine
        cursor = after
        first, self.first = self.first, None  # it echoes the input: not kept
        if first is not None and after < first.seq:
            cursor = first.seq
            yield self._encode([first])
        del first
        limit = FIRST_PAGE
        while True:
            # The feed answers at the live edge, never behind what the run's record says
            # is committed (``last``): then the log is read.
            cached = feed.cached_after(cursor, limit, last)
            if cached is None and not self.legacy:
                # Replay from the log: the database assembles the page's frames.
                upto, text = await self._patient(follow, replay_page, engine, run, cursor,
                                                 limit)
                limit = REPLAY_PAGE
                if text:
                    cursor = upto
                    yield text
                    continue
            else:
                page = cached if cached is not None else \
                    await self._patient(follow, engine.run_events, run, cursor, limit)
                limit = PAGE
                if page:
                    cursor = page[-1].seq
                    yield self._encode(page)
                    continue
            if (final and cursor >= last) or not follow:
                return
            await feed.wait(cursor)
            if engine.draining:
                return  # the client resumes from another process (Last-Event-ID)
            if feed.last_seq > cursor or feed.final:  # a commit woke it: no read
                last, final = max(last, feed.last_seq), feed.final
                continue
            edge = await self._edge(feed, run, cursor, last, follow)
            if edge is None:
                return
            last, final = edge

    async def _edge(self, feed: RunFeed, run: RunRecord, cursor: int, last: int,
                    follow: bool) -> tuple[int, bool] | None:
        """After a wake-up that no commit of this process made, the run's last committed
        seq and whether it is final; None when the stream ends here (the run is gone,
        compacted, or ended at ``cursor``)."""
        if feed.last_seq > cursor or feed.final:
            return max(last, feed.last_seq), feed.final
        # The hub's sweep woke a quiet feed: the log is the truth (hints can be lost
        # across processes).
        current = await self._patient(follow, self.engine.reread, run)
        if current is None or current.compacted_at is not None:
            return None
        final = self.engine.is_final(current)
        _catch_up(feed, current.last_seq, final)
        if final and cursor >= current.last_seq:
            return None
        return current.last_seq, final

    async def _reopen(self, after: int, past_end: bool) -> list[str]:
        return await self.reopen(after, past_end=past_end)


def _catch_up(feed: RunFeed, last: int, final: bool) -> None:
    """A record read shows commits the feed missed (another process's, whose hints were
    lost): the feed learns of them, so every reader of it goes to the log for them."""
    if last > feed.last_seq or (final and not feed.final):
        feed.advance([], last, final)


async def hydration_frames(engine: Engine, principal: str, view: ThreadView | None,
                           thread_id: str, run_id: str, *, legacy: bool) -> AsyncIterator[str]:
    """spec §3 hydration: the thread's snapshot, then its active run live, if any.

    Snapshot, interrupts and active run come from one consistent read (G5)."""
    yield retry_preamble()
    view = await _started(engine, principal, view)
    if view is None:
        yield synthesized(events.run_started(thread_id, run_id))
        yield synthesized(events.state_snapshot({}))
        yield synthesized(events.messages_snapshot([]))
        yield synthesized(events.run_finished(thread_id, run_id))
        return
    active = view.current_run
    snap = view.snapshot
    yield synthesized(events.run_started(thread_id, active.id if active else run_id))
    yield synthesized(events.state_snapshot(snap.state))
    yield synthesized(events.messages_snapshot(snap.messages))
    if active is None:
        outcome = None
        if view.interrupts:
            outcome = {"type": "interrupt", "interrupts": [i.body for i in view.interrupts]}
        yield synthesized(events.run_finished(thread_id, run_id, outcome=outcome))
        return
    # The snapshot is as of a boundary of the active run (its first commit saves
    # one), where nothing is open: its events after that seq complete the picture.
    after = snap.as_of_seq if snap.as_of_run == active.id and snap.as_of_seq else 1
    stream = RunStream(engine, active, legacy=legacy)
    async for f in stream.frames(after, synthesize_start=False):
        if is_preamble(f):
            continue
        yield f


async def _started(engine: Engine, principal: str, view: ThreadView | None) -> ThreadView | None:
    """The thread's view once its active run (if any) is running and has committed its
    first event, which saves the snapshot the hydration starts from."""
    while view is not None:
        current = view.current_run
        if current is None or (current.status == "running" and current.last_seq > 0):
            return view
        # Queued, or running without a first commit yet: wait briefly for its start.
        async with engine.watch(current) as feed:
            await feed.wait(0, 0.25)
        view = await engine.thread_view(principal, view.thread.id)
    return None
