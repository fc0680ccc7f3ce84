"""SQLite's one write connection's lock: first come, first served, except that a group
commit gives way to the transactions a request waits on."""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque


class WriteLock:
    """The one write connection's lock: first come, first served, except that a group
    commit gives way to the transactions a request waits on (an admission, a claim, a
    cancel). Ten runs admitted at once behind full-speed runs otherwise wait out a
    commit of hundreds of events between two admissions, and the last one's first
    event comes many commits late. At most ``GIVE_WAY`` of them go before a waiting
    commit, so the log keeps moving."""

    GIVE_WAY = 16

    def __init__(self) -> None:
        self._locked = False
        self._urgent: deque[asyncio.Future[None]] = deque()
        self._batch: deque[asyncio.Future[None]] = deque()
        self._streak = 0  # urgent holders since a group commit last held the lock

    async def acquire(self, *, batch: bool = False) -> None:
        if not self._locked:
            self._locked = True
            return
        fut = asyncio.get_running_loop().create_future()
        queue = self._batch if batch else self._urgent
        queue.append(fut)
        try:
            await fut
        except asyncio.CancelledError:
            if fut.cancelled():
                with contextlib.suppress(ValueError):  # release() may have dropped it
                    queue.remove(fut)
            else:
                self.release()  # handed over as the caller was cancelled: pass it on
            raise

    def release(self) -> None:
        """Hand the lock to the next waiter still waiting, or free it."""
        while self._urgent or self._batch:
            urgent = bool(self._urgent) and (self._streak < self.GIVE_WAY or not self._batch)
            fut = (self._urgent if urgent else self._batch).popleft()
            if fut.done():
                continue  # its caller was cancelled
            self._streak = self._streak + 1 if urgent else 0
            fut.set_result(None)
            return
        self._locked = False

    async def __aenter__(self) -> None:
        await self.acquire()

    async def __aexit__(self, *exc: object) -> None:
        self.release()
