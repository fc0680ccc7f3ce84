"""Live fan-out: subscribers wait for a run's committed ``seq`` to move.

G10: there is no per-subscriber queue. A run has one feed holding its last
committed seq and its latest commit's events; subscribers pull from those or
the log, so an unread subscriber costs nothing that grows.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator

from outlast.store.base import StoredEvent

CACHE_EVENTS = 1024
"""A feed keeps its run's latest commit, up to this many events (the last ones): a run's
commit is rarely larger (the writer shares about a thousand events a commit among the
runs writing). Older commits are the log's: a subscriber at the live edge reads each
commit before the next one comes, so the older commits a feed once kept were read by
nobody yet held in every watched running run (docs/performance.md, "Memory per watched
running run")."""


POKE_SECONDS = 1.0
"""A feed that has not moved for this long wakes its waiters anyway, who then read the
log: the truth when a hint from another process was lost. One sweep of the hub does this
for every feed, instead of a timer for every wait (a stream waits once per event)."""


class RunFeed:
    """The live edge of one run: last committed seq, final flag, the latest commit."""

    __slots__ = ("_waiting", "cache", "final", "holders", "last_seq", "moved_at")

    def __init__(self) -> None:
        self.last_seq = 0
        self.final = False
        # The latest commit's events, as the writer published them (never changed).
        self.cache: list[StoredEvent] = []
        # The waits of this generation: one future each, woken together by poke (a list
        # swapped out, not an Event made anew at every commit).
        self._waiting: list[asyncio.Future[None]] = []
        self.holders = 0
        self.moved_at = time.monotonic()

    def advance(self, events: list[StoredEvent], last_seq: int, final: bool,
                now: float | None = None) -> None:
        if events:
            self.cache = events if len(events) <= CACHE_EVENTS else events[-CACHE_EVENTS:]
        if last_seq > self.last_seq:
            self.last_seq = last_seq
        self.final = self.final or final
        self.moved_at = time.monotonic() if now is None else now
        self.poke()

    def poke(self) -> None:
        """Wake everyone waiting on this generation, then start a new one."""
        waiting = self._waiting
        if waiting:
            self._waiting = []
            for fut in waiting:
                if not fut.done():
                    fut.set_result(None)

    def cached_after(self, after: int, limit: int, known: int = 0) -> list[StoredEvent] | None:
        """Events after ``after`` from the cache (empty: nothing is committed after it),
        or None if the cache does not cover them and the log must be read. ``known`` is
        the last seq the reader knows committed (the run's record): a feed behind it (the
        commits of another process, whose hints were lost) never answers "nothing newer"."""
        cache = self.cache
        if not cache or cache[0].seq > after + 1:
            return None
        if cache[-1].seq <= after:
            # A subscriber at the live edge: nothing newer unless another process's hint,
            # or the record the reader read, moved past what this process published.
            return [] if after >= max(self.last_seq, known) else None
        start = after + 1 - cache[0].seq
        end = min(len(cache), start + limit)
        return [cache[i] for i in range(start, end)]

    async def wait(self, after: int, seconds: float | None = None) -> None:
        """Return when the feed moves past ``after``, turns final, or after ``seconds``
        (None: when the hub's sweep finds the feed quiet, within twice POKE_SECONDS)."""
        if self.last_seq > after or self.final:
            return
        fut = asyncio.get_running_loop().create_future()
        waiting = self._waiting
        waiting.append(fut)
        try:
            if seconds is None:
                await fut
                return
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(seconds):  # wait_for (3.11) can swallow a cancel
                    await fut
        finally:
            if fut.cancelled():  # the wait was cancelled or timed out: not woken, listed
                with contextlib.suppress(ValueError):
                    waiting.remove(fut)


class Hub:
    """The feeds of runs that someone writes or watches in this process.

    The one owner of feed lifetimes (G10): a feed exists while it has a holder (the
    run's execution, a subscriber, a waiting cancel) and is dropped with the last one.
    Publishing to a run nobody holds here costs nothing and keeps nothing."""

    def __init__(self) -> None:
        self._feeds: dict[int, RunFeed] = {}

    def acquire(self, rid: int) -> RunFeed:
        """Hold a run's feed (creating it); every ``acquire`` is paired with a ``release``."""
        feed = self._feeds.get(rid)
        if feed is None:
            feed = self._feeds[rid] = RunFeed()
        feed.holders += 1
        return feed

    def release(self, rid: int) -> None:
        """Let go of a run's feed; the last holder's release drops it."""
        feed = self._feeds.get(rid)
        if feed is None:
            return
        feed.holders -= 1
        if feed.holders <= 0:
            del self._feeds[rid]

    @contextlib.contextmanager
    def watch(self, rid: int) -> Iterator[RunFeed]:
        """The feed of a run, held for the block."""
        feed = self.acquire(rid)
        try:
            yield feed
        finally:
            self.release(rid)

    def publish(self, rid: int, events: list[StoredEvent], last_seq: int, final: bool,
                now: float | None = None) -> None:
        """G2: called only after the events are committed (``now``: ``time.monotonic()``,
        read once for a commit's many runs)."""
        feed = self._feeds.get(rid)
        if feed is not None:
            feed.advance(events, last_seq, final, now)

    def hint(self, rid: int, last_seq: int, final: bool) -> None:
        """A notification from another process: wake readers, who read the log."""
        feed = self._feeds.get(rid)
        if feed is not None:
            feed.advance([], last_seq, final)

    def poke_quiet(self) -> None:
        """Wake the waiters of every feed that has not moved for POKE_SECONDS."""
        quiet = time.monotonic() - POKE_SECONDS
        for feed in self._feeds.values():
            if feed.moved_at <= quiet:
                feed.poke()

    def poke_all(self) -> None:
        """Wake the waiters of every feed (the server is draining)."""
        for feed in self._feeds.values():
            feed.poke()

    async def sweep(self) -> None:
        """Poke quiet feeds every POKE_SECONDS, for as long as the engine runs."""
        while True:
            await asyncio.sleep(POKE_SECONDS)
            self.poke_quiet()

    def __len__(self) -> int:
        return len(self._feeds)

    def __contains__(self, rid: int) -> bool:
        return rid in self._feeds
