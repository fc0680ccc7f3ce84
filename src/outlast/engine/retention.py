"""Retention (spec §6): the events of runs final for longer than a window go; their
run records and the thread snapshots stay, and reading their events answers 410
``run_compacted``.

The work is done in batches, each one short store transaction, with a pause between
them: writers of live runs (one SQLite writer, or row locks on PostgreSQL) never wait
behind a long delete. The engine's upkeep loop runs it every ``interval(window)``;
``outlast gc`` runs it on demand, through the server (``POST /admin/gc``) or on a
store no server holds.
"""

from __future__ import annotations

import asyncio
import logging
import time

from outlast.config import Settings
from outlast.errors import InvalidRequest, StoreUnavailable
from outlast.store.base import Freed, Store

log = logging.getLogger("outlast.engine")

# One batch: at most this many runs and about this many events (a longer log goes
# over several batches), small enough that concurrent streams are not held up behind it
# (bench/retention_soak.py measures it: docs/performance.md, "Retention").
BATCH_RUNS = 100
BATCH_EVENTS = 2000
# Between batches: a writer waiting for the store gets it first.
PAUSE = 0.01


def interval(window: float) -> float:
    """How often upkeep compacts for a window of ``window`` seconds: a quarter of it,
    between 1 s and 60 s, so events go shortly after the window ends."""
    return min(max(window / 4, 1.0), 60.0)


async def compact(store: Store, before: float, *, dry_run: bool = False) -> Freed:
    """Compact every run final since before ``before`` (a time.time() value), batch by
    batch, giving space back after each; with ``dry_run``, only say what it would free."""
    if dry_run:
        return await store.compactable(before)
    total = Freed()
    while True:
        batch = await store.compact(before, time.time(), BATCH_RUNS, BATCH_EVENTS)
        if batch is None:
            await store.reclaim()  # what a throttled reclaim left for later
            return total
        total += batch
        await store.reclaim()
        await asyncio.sleep(PAUSE)


async def upkeep(store: Store, s: Settings) -> None:
    """The engine's upkeep loop: idempotency records past their retention, and the
    events past ``--event-retention``, every ``interval`` of it."""
    # spec §6: events go shortly after their window, not up to an hour later.
    every = 600.0 if s.event_retention is None else interval(s.event_retention)
    while True:
        try:
            await store.prune(time.time() - s.idempotency_retention)
            if s.event_retention is not None:
                freed = await compact(store, time.time() - s.event_retention)
                if freed.runs or freed.events:
                    log.info("retention: compacted %d runs, removed %d events "
                             "(%d bytes)", freed.runs, freed.events, freed.bytes)
        except StoreUnavailable:
            pass  # said once by the OutageWatch; the next round prunes
        except Exception:
            log.exception("retention pruning failed")
        await asyncio.sleep(every)


async def on_demand(store: Store, retention: float | None, older_than: float | None, *,
                    dry_run: bool) -> tuple[float, Freed]:
    """``outlast gc``: compact the runs final for longer than ``older_than`` seconds
    (default the server's ``retention``) now; with ``dry_run`` only measure. The window
    used, and what was (or would be) freed."""
    window = retention if older_than is None else older_than
    if window is None:
        raise InvalidRequest("no retention window: this server has no "
                             "--event-retention, so say how old (olderThan, seconds)")
    return window, await compact(store, time.time() - window, dry_run=dry_run)
