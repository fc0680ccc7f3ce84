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
import time

from outlast.store.base import Freed, Store

# One batch: at most this many runs and about this many events (a longer log goes
# over several batches). Measured by bench/retention_soak.py: a batch of this size
# keeps concurrent streams' p99 delay well under 50 ms on SQLite.
BATCH_RUNS = 100
BATCH_EVENTS = 2000
# Between batches: a writer waiting for the store gets it first.
PAUSE = 0.01


def interval(window: float) -> float:
    """How often upkeep collects for a window of ``window`` seconds: a quarter of it,
    between 1 s and 60 s, so events go shortly after the window ends."""
    return min(max(window / 4, 1.0), 60.0)


async def collect(store: Store, before: float, *, dry_run: bool = False) -> Freed:
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
