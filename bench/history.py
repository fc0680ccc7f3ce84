"""A turn's cost once the service has a history: a store months old against a new one.

A server runs for months and keeps every run's record (retention removes events, not
runs), and one conversation can go on for thousands of turns. Nothing a new turn does
should cost more for that. In process, on two real SQLite files (``synchronous=FULL``)
open side by side:

- ``grown``: 10,000 finished runs whose clients resent an 8 KB history (each record a
  few pages), 3,000 of them earlier turns of the thread the turns go to, each of those
  with an approval (an interrupt) answered;
- ``new`` (the baseline): an empty file, the turns going to one new thread.

A turn is timed in two parts, alternating between the stores: its admission
(``Engine.admit``: the idempotency record, the thread's live runs, the claim, the
``RUN_STARTED`` commit) and its end (``Store.write`` of ``RUN_FINISHED`` with the run's
finish, which recomputes the thread's status). Target: grown ≤ 1.2x new, for each part.

    python -m bench.history [--quick]
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.agents import BenchAgent, bench_input
from bench.common import alternating, median, median_p10_p90, parser, report, started_run
from outlast.config import Settings
from outlast.engine.admission import RunOptions
from outlast.engine.runtime import Engine
from outlast.protocol.jsonutil import dumps
from outlast.store import open_store
from outlast.store.base import FinishWrite, RunWrite, StoredEvent

TARGET = 1.2
PRINCIPAL = "local"
RUNS, ON_THREAD, INPUT_BYTES = 10_000, 3_000, 8_000


def grow(path: Path) -> None:
    """Add finished runs to a migrated file: ``ON_THREAD`` on thread ``turns``, the
    rest one per thread (as many conversations would leave them)."""
    con = sqlite3.connect(path)
    try:
        text = json.dumps({"messages": [{"id": "m", "role": "user",
                                          "content": "x" * INPUT_BYTES}]})
        con.execute("INSERT INTO threads (principal, id, created_at, updated_at) "
                    "VALUES (?, 'turns', 1, 1)", (PRINCIPAL,))
        con.executemany(
            "INSERT INTO threads (principal, id, created_at, updated_at) VALUES (?, ?, 1, 1)",
            [(PRINCIPAL, f"old-{i}") for i in range(RUNS - ON_THREAD)])
        tids = dict(con.execute("SELECT id, tid FROM threads"))
        rows = [(f"turn-{i}", "turns") for i in range(ON_THREAD)]
        rows += [(f"old-run-{i}", f"old-{i}") for i in range(RUNS - ON_THREAD)]
        con.executemany(
            "INSERT INTO runs (principal, id, tid, thread_id, agent, status, idempotency_key, "
            "fingerprint, input, options, created_at, started_at, finished_at, attempts) "
            "VALUES (?, ?, ?, ?, 'bench', 'succeeded', ?, 'f', ?, '{}', 1, 1, 2, 1)",
            [(PRINCIPAL, run_id, tids[thread_id], thread_id, run_id, text)
             for run_id, thread_id in rows])
        # Each earlier turn asked for an approval, answered since (an agent whose tools
        # need one raises an interrupt every turn).
        con.executemany(
            "INSERT INTO interrupts (tid, id, rid, run_id, body, status, answered_at) "
            "SELECT tid, 'approve-' || id, rid, id, '{}', 'resolved', 2 FROM runs "
            "WHERE principal = ? AND id = ?",
            [(PRINCIPAL, f"turn-{i}") for i in range(ON_THREAD)])
        con.commit()
    finally:
        con.close()


class Store:
    """One store and the thread its turns go to."""

    def __init__(self, root: Path, name: str) -> None:
        self.dir = root / name
        self.dir.mkdir()
        self.name = name
        self.turn = 0
        self.engine: Engine | None = None

    async def open(self, grown: bool) -> None:
        if grown:  # migrate, close, grow, reopen
            store = open_store(None, self.dir)
            await store.open()
            await store.close()
            grow(self.dir / "outlast.db")
        store = open_store(None, self.dir)
        self.engine = Engine(Settings(data_dir=self.dir), store, {"bench": BenchAgent()})
        await store.open()

    async def close(self) -> None:
        assert self.engine is not None
        await self.engine.store.close()

    async def one_turn(self) -> tuple[float, float]:
        """Admit a run on the thread and end it; each part's ms."""
        engine = self.engine
        assert engine is not None
        self.turn += 1
        run_id = f"{self.name}-{self.turn}"
        t0 = time.perf_counter()
        admitted = await engine.admit(PRINCIPAL, "bench", bench_input("turns", run_id, 10),
                                      RunOptions())
        t1 = time.perf_counter()
        run = started_run(admitted)
        finished = dumps({"type": "RUN_FINISHED", "threadId": "turns", "runId": run_id})
        t2 = time.perf_counter()
        fenced = await engine.store.write([RunWrite(
            rid=run.rid, tid=run.tid, run_id=run.id, attempt=run.attempts,
            instance=engine.instance, prev_seq=run.last_seq,
            events=[StoredEvent(run.last_seq + 1, True, finished)],
            finish=FinishWrite("succeeded", outcome={"type": "success"}))])
        t3 = time.perf_counter()
        assert not fenced
        return (t1 - t0) * 1000, (t3 - t2) * 1000


async def measure(turns: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="outlast-bench-") as tmp:
        stores = {"grown": Store(Path(tmp), "grown"), "new": Store(Path(tmp), "new")}
        for name, store in stores.items():
            await store.open(grown=name == "grown")
        try:
            return await alternating({name: s.one_turn for name, s in stores.items()},
                                     ("admit", "end"), turns, 10)
        finally:
            for store in stores.values():
                await store.close()


async def main_async(quick: bool) -> tuple[dict[str, Any], list[tuple[str, ...]]]:
    r = await measure(100 if quick else 400)
    rows: list[tuple[str, ...]] = [("part of a turn", "new store ms (p10-p90)",
                                    f"grown store ms ({RUNS:,} runs, {ON_THREAD:,} on the thread)",
                                    "grown / new", f"≤ {TARGET}")]
    for part, label in (("admit", "admission (Engine.admit)"), ("end", "end (Store.write)")):
        cells = [median_p10_p90(r[name][part]) for name in ("new", "grown")]
        ratio = median(r["grown"][part]) / median(r["new"][part])
        r[f"ratio_{part}"] = ratio
        rows.append((label, *cells, f"{ratio:.2f}", "yes" if ratio <= TARGET else "NO"))
    return r, rows


def main() -> None:
    ns = parser(__doc__).parse_args()
    results, rows = asyncio.run(main_async(ns.quick))
    report("a turn on a store with a history", results, rows, ns.json)


if __name__ == "__main__":
    main()
