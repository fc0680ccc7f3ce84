"""Whether the store writes: an outage is a condition the service knows, not an error
per request.

The store tells the watch of every outage a write meets and of the writes after one
(``Store.report_outage``). An outage is said once in the log (what failed, where, the
free space when known) and once when it ends; meanwhile ``/readyz`` says not ready, the
writer keeps every run's unwritten events and retries (G2: nothing is shown before it
is stored), and a probe write every ``PROBE_EVERY`` seconds notices the store is back
even when nothing else writes. Runs that wait longer than ``--storage-wait`` are
stopped and end ``failed`` with the outage's code once that can be written.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from outlast.errors import StoreUnavailable

log = logging.getLogger("outlast.outages")

T = TypeVar("T")

OUTAGES = {
    "storage_full": "The server's storage is full: the run was stopped after waiting for "
                    "space. What it had done is kept; start a new run once the service is "
                    "back.",
    "store_unavailable": "The server's store could not write: the run was stopped after "
                         "waiting for it. What it had done is kept; start a new run once "
                         "the service is back.",
}
"""The stop reasons of a store outage (engine.outages) and what the run's RUN_ERROR says."""

SETTLE = 1.0
"""Seconds of writes without a failure that end an outage."""
PROBE_EVERY = 0.25
"""Seconds between probe writes during an outage: runs continue well within a second
of the store writing again."""


class OutageWatch:
    """The store's write health, as the store reports it."""

    def __init__(self, where: str, data_dir: Path | None,
                 on_change: Callable[[bool], None] | None = None) -> None:
        self.where = where  # the store, as the log names it
        self.data_dir = data_dir  # whose free space the log quotes (SQLite)
        self.outage: StoreUnavailable | None = None
        self.since = 0.0
        self._failed_at = 0.0
        self._on_change = on_change
        self._began = asyncio.Event()
        self._ended = asyncio.Event()
        self._ended.set()

    def __call__(self, problem: StoreUnavailable | None) -> None:
        """``Store.report_outage``: an outage met, or (None) a write that worked."""
        now = time.monotonic()
        if problem is None:
            # A small write can fit where a commit cannot (a full disk leaves SQLite the
            # log space it already has): the outage ends after SETTLE seconds of writes
            # without a failure, not at the first that works, so it is said once.
            if self.outage is not None and now - self._failed_at >= SETTLE:
                log.warning("%s writes again after %.1f s", self.where, self.waited)
                self.outage = None
                self._began.clear()
                self._ended.set()
                if self._on_change is not None:
                    self._on_change(False)
            return
        self._failed_at = now
        if self.outage is None:
            self.since = now
            log.error("%s cannot write: %s%s; new runs are refused with 503 and running "
                      "runs wait until it writes again", self.where, problem.message,
                      self._free_space())
            self._ended.clear()
            self._began.set()
            if self._on_change is not None:
                self._on_change(True)
        self.outage = problem

    @property
    def waited(self) -> float:
        """Seconds the current outage has lasted (0 without one)."""
        return time.monotonic() - self.since if self.outage is not None else 0.0

    async def wait_outage(self) -> None:
        """Until an outage begins."""
        await self._began.wait()

    async def wait_writable(self, seconds: float) -> None:
        """Until the store writes again, or ``seconds``."""
        try:
            await asyncio.wait_for(self._ended.wait(), seconds)
        except TimeoutError:
            pass

    def _free_space(self) -> str:
        if self.data_dir is None:
            return ""
        try:
            free = shutil.disk_usage(self.data_dir).free
        except OSError:
            return ""
        return f" ({free // 1024} KiB free in {self.data_dir})"


class Patient:
    """How an execution makes the store calls its agent waits on (the effect journal):
    while the store cannot write they are tried again, as the writer tries its commits,
    instead of failing the agent; the run is stopped meanwhile only by losing its lease,
    a cancel, or ``--storage-wait`` (``waiting`` says it waits)."""

    __slots__ = ("waiting",)

    def __init__(self) -> None:
        self.waiting = False

    async def __call__(self, op: Callable[..., Awaitable[T]], *args: Any) -> T:
        delay = PROBE_EVERY
        try:
            while True:
                try:
                    return await op(*args)
                except StoreUnavailable:
                    self.waiting = True
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 1.0)
        finally:
            # However the call ends (a result, another error, a cancel), it waits no more.
            self.waiting = False


async def probe(watch: OutageWatch, write: Callable[[], Awaitable[None]],
                wait_limit: float, give_up: Callable[[StoreUnavailable], None]) -> None:
    """The engine's task: during an outage, a probe write every ``PROBE_EVERY`` seconds
    (the store reports its outcome), and ``give_up`` once it has lasted ``wait_limit``
    seconds (again at every probe after, for runs that start waiting later)."""
    while True:
        await watch.wait_outage()
        while watch.outage is not None:
            if watch.waited >= wait_limit:
                give_up(watch.outage)
            await asyncio.sleep(PROBE_EVERY)
            with contextlib.suppress(StoreUnavailable):
                await write()
