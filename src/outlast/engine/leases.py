"""Leases kept by a thread, so that a blocked event loop cannot lose them (G8).

An agent that blocks the event loop (a synchronous HTTP call, a CPU-bound parse)
stops every task of the process, the lease heartbeat included. Were its leases
renewed on the loop, another process (or this one, once the loop runs again) would
take its runs over after the lease TTL while they still run, and their effects could
happen twice. ``LeaseKeeper`` renews them from a thread of its own, on a connection
of its own (``Store.lease_renewer``), every third of the TTL, whatever the loop does.
What a renewal finds (a lease lost, a cancel requested) is handed to the loop, which
acts on it when it runs.

The loop beats (``beat``) several times a TTL; the thread says in the log, once per
stall, when the loop has not run for a third of the TTL, naming the runs executing
here, and again when it runs.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Mapping

from outlast.store.base import LeaseRenewer, LeaseState

log = logging.getLogger("outlast.leases")

Renewed = Callable[[list[int], list[LeaseState]], None]


class LeaseKeeper:
    """Renews the leases of the runs executing here from its own thread."""

    def __init__(self, renewer: LeaseRenewer, instance: str, ttl: float,
                 on_renewed: Renewed) -> None:
        self.renewer = renewer
        self.instance = instance
        self.ttl = ttl
        self.interval = max(0.05, ttl / 3)
        self.on_renewed = on_renewed  # called on the loop with what a renewal found
        self.renewed_at = time.monotonic()  # the last renewal that succeeded
        self._runs: Mapping[int, str] = {}  # rid -> run id; replaced whole, never edited
        self._beat = time.monotonic()
        self._stalled_since: float | None = None
        self._stop = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._beat = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="outlast-leases", daemon=True)
        self._thread.start()

    async def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join, 5.0)
            self._thread = None

    def track(self, runs: Mapping[int, str]) -> None:
        """The runs executing here now (rid -> run id), from the loop."""
        self._runs = dict(runs)

    async def beating(self) -> None:
        """The loop's beat: the thread reads it to notice a loop that does not run."""
        while True:
            self._beat = time.monotonic()
            await asyncio.sleep(self.interval / 4)

    def _run(self) -> None:
        try:
            while not self._stop.wait(self.interval):
                self._watch_loop()
                self._renew()
        finally:
            self.renewer.close()

    def _renew(self) -> None:
        runs = self._runs
        if not runs:
            return
        rids = sorted(runs)
        try:
            held = self.renewer.renew(self.instance, self.ttl, rids)
        except Exception as exc:
            # Said by others: a store that cannot write by the StorageWatch, and once
            # these renewals are late the loop renews itself (``Engine._pump``), where a
            # failure is logged.
            log.debug("lease renewal failed (%s: %s)", type(exc).__name__, exc)
            return
        self.renewed_at = time.monotonic()
        loop = self._loop
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self.on_renewed, rids, held)
            except RuntimeError:
                pass  # the loop closed meanwhile: the process is ending

    def _watch_loop(self) -> None:
        now = time.monotonic()
        quiet = now - self._beat
        if quiet > self.ttl / 3 and self._stalled_since is None:
            self._stalled_since = self._beat
            names = ", ".join(sorted(self._runs.values())) or "none"
            log.warning("the event loop has not run for %.1f s (runs executing here: %s): "
                        "an agent is blocking it (a synchronous call, CPU-bound work); "
                        "their leases are kept from another thread, but every stream and "
                        "run of this process waits", quiet, names)
        elif quiet <= self.ttl / 3 and self._stalled_since is not None:
            log.warning("the event loop runs again after %.1f s",
                        self._beat - self._stalled_since)
            self._stalled_since = None
