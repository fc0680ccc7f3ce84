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

**The holder's lease runs out first (G8, G9).** A process cut off from the store (a
network partition) cannot renew, and must not go on working on runs that another process
may take over. Each run's lease here ends, by this process's monotonic clock, one TTL
after the *sending* of the last claim or renewal of it that succeeded: the store set that
lease's expiry to its own clock at the statement, later, plus the TTL. Each beat of the
loop checks those deadlines and hands a run whose lease ran out to ``on_expired`` (the
engine stops its agent and drops its unwritten events). Another process takes a run over
only once the store's clock is ``takeover_margin(ttl)`` past its expiry, so the holder
has stopped by then: see ``takeover_margin``.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from outlast.store.base import LeaseRenewer, LeaseState, Store, takeover_margin

if TYPE_CHECKING:
    from outlast.config import Settings
    from outlast.engine.execution import RunExecution
    from outlast.engine.writer import Writer

log = logging.getLogger("outlast.leases")

Renewed = Callable[[list[int], list[LeaseState]], None]
Expired = Callable[[list[int]], None]

def takeover_after(ttl: float) -> float:
    """Seconds from a holder's last renewal until another process may hold its runs."""
    return ttl + takeover_margin(ttl)


class LeaseKeeper:
    """Renews the leases of the runs executing here from its own thread."""

    def __init__(self, renewer: LeaseRenewer, instance: str, ttl: float,
                 on_renewed: Renewed, on_expired: Expired | None = None) -> None:
        self.renewer = renewer
        self.instance = instance
        self.ttl = ttl
        self.interval = max(0.05, ttl / 3)
        self.on_renewed = on_renewed  # called on the loop with what a renewal found
        self.on_expired = on_expired  # called on the loop with the runs whose lease ran out
        self.renewed_at = time.monotonic()  # the last renewal that succeeded
        self._runs: Mapping[int, str] = {}  # rid -> run id; replaced whole, never edited
        # rid -> when the last claim or renewal of its lease that succeeded was sent
        # (monotonic); written from both the loop and the thread, under the lock.
        self._held: dict[int, float] = {}
        self._held_lock = threading.Lock()
        self._beat = time.monotonic()
        self._stalled_since: float | None = None
        self._stop = threading.Event()
        self._soon = threading.Event()  # renew now, not at the next interval
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._beat = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="outlast-leases", daemon=True)
        self._thread.start()

    async def stop(self) -> None:
        self._stop.set()
        self._soon.set()
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join, 5.0)
            self._thread = None

    def track(self, runs: Mapping[int, str]) -> None:
        """The runs executing here now (rid -> run id), from the loop."""
        self._runs = dict(runs)
        with self._held_lock:
            for rid in [r for r in self._held if r not in runs]:
                del self._held[rid]

    def held(self, rids: list[int], sent: float) -> None:
        """The leases of ``rids`` were claimed or renewed by a statement sent at ``sent``
        (monotonic): each lasts here until one TTL after it."""
        with self._held_lock:
            for rid in rids:
                if sent > self._held.get(rid, -1.0):
                    self._held[rid] = sent
        if sent + self.ttl - time.monotonic() < 2 * self.interval:
            # A claim that took a third of the TTL to come back (a busy store): renewed
            # at once rather than at the next interval, which could come too late.
            self._soon.set()

    def expired(self, now: float | None = None) -> list[int]:
        """The runs whose lease here ran out (forgotten once returned)."""
        limit = (time.monotonic() if now is None else now) - self.ttl
        with self._held_lock:
            gone = [rid for rid, sent in self._held.items() if sent <= limit]
            for rid in gone:
                del self._held[rid]
        return gone

    async def beating(self) -> None:
        """The loop's beat: the thread reads it to notice a loop that does not run."""
        while True:
            self._beat = time.monotonic()
            if self.on_expired is not None:
                gone = self.expired(self._beat)
                if gone:
                    self.on_expired(gone)
            await asyncio.sleep(self.interval / 4)

    def _run(self) -> None:
        try:
            while True:
                self._soon.wait(self.interval)
                self._soon.clear()
                if self._stop.is_set():
                    break
                self._watch_loop()
                self._renew()
        finally:
            self.renewer.close()

    def _renew(self) -> None:
        runs = self._runs
        if not runs:
            return
        rids = sorted(runs)
        sent = time.monotonic()
        try:
            held = self.renewer.renew(self.instance, self.ttl, rids)
        except Exception as exc:
            # Said by others: a store that cannot write by the OutageWatch, and once
            # these renewals are late the loop renews itself (``Engine._pump``), where a
            # failure is logged.
            log.debug("lease renewal failed (%s: %s)", type(exc).__name__, exc)
            return
        self.renewed_at = time.monotonic()
        self.held([s.rid for s in held], sent)
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


class Losses:
    """Runs this process stopped because their lease ran out here: said in the log when
    it happens, and once more, when the store answers again, with what became of each."""

    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        self._lost: dict[int, tuple[str, int]] = {}  # rid -> (run id, our attempt)

    def lost(self, rid: int, run_id: str, attempt: int) -> None:
        self._lost[rid] = (run_id, attempt)
        log.warning("run %s: its lease was not renewed for %.1f s (the store is out of "
                    "reach): stopped here, its unwritten events dropped; another process "
                    "may take it over %.1f s after the last renewal", run_id, self.ttl,
                    takeover_after(self.ttl))

    def __bool__(self) -> bool:
        return bool(self._lost)

    async def report(self, store: Store) -> None:
        """Once the store answers: what became of each run lost here, one line each."""
        for rid, (run_id, attempt) in list(self._lost.items()):
            run = await store.get_run_by_rid(rid)
            del self._lost[rid]
            if run is None:
                log.warning("run %s: the store answers again; the run is gone (its thread "
                            "was deleted)", run_id)
            elif run.attempts != attempt or run.status != "running":
                log.warning("run %s: the store answers again; attempt %d stopped here "
                            "and the run is %s at attempt %d%s", run_id, attempt,
                            run.status, run.attempts,
                            ", taken over" if run.attempts != attempt else "")
            else:
                log.warning("run %s: the store answers again; attempt %d stopped here "
                            "and the run waits to be taken over (by any process)",
                            run_id, attempt)


class HeldLeases:
    """The engine's side of the leases of the runs it executes (a base of ``Engine``):
    renewing them from the loop, and stopping the runs whose lease is gone or ran out."""

    executions: dict[int, RunExecution]
    store: Store
    settings: Settings
    instance: str
    writer: Writer
    leases: LeaseKeeper
    losses: Losses
    _renewed: float

    async def _renew(self) -> None:
        """Renew the leases of the runs executing here from the loop (the pump's, when
        the lease thread's renewals have failed a while); stop those no longer held."""
        # Renew only what still executes here: a run whose execution ended without
        # settling (an engine failure, say) must expire so another attempt takes it (G8).
        local = list(self.executions)
        sent = time.monotonic()
        held = await self.store.renew_leases(self.instance, self.settings.lease_ttl, local)
        self._renewed = time.monotonic()
        self.leases.held([s.rid for s in held], sent)
        self._leases_renewed(local, held)

    def _track_leases(self) -> None:
        self.leases.track({rid: ex.run.id for rid, ex in self.executions.items()})

    def _leases_renewed(self, rids: list[int], held: list[LeaseState]) -> None:
        """What a renewal of ``rids`` found: stop the runs whose lease is gone (fencing:
        without it they must not write another byte) or whose cancel was asked."""
        states = {s.rid: s for s in held}
        for rid in rids:
            ex = self.executions.get(rid)
            if ex is None or ex.done.is_set():
                continue
            state = states.get(rid)
            if state is None or state.attempt != ex.run.attempts:
                ex.stop("lease_lost")
            elif state.cancel_requested:
                ex.stop("cancel")

    def _leases_expired(self, rids: list[int]) -> None:
        """Runs whose lease ran out here unrenewed (the store is out of reach): stopped
        now, before any other process may take them over (``leases.takeover_margin``),
        and nothing more of them is written."""
        for rid in rids:
            ex = self.executions.get(rid)
            if ex is not None and not ex.done.is_set():
                self.losses.lost(rid, ex.run.id, ex.run.attempts)
                self.writer.abandon(ex.channel)
                ex.stop("lease_lost")
