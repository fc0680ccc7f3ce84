"""Replay rate of a finished 20,000-event run, against streaming pre-encoded frames.

Durable: ``GET /runs/{id}/events?follow=false`` reads the log from SQLite a page at a
time, encodes SSE frames and streams them. Baseline: ``GET /bench/runs/{id}/events``
on the same server streams the same bytes, encoded once ahead and held in memory.
Target: durable ≥ 0.8 x baseline (events per second, medians).

    python -m bench.replay [--quick]
"""

from __future__ import annotations

import asyncio
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import (
    Server,
    client,
    finished_run,
    fmt,
    median,
    parser,
    read_stream,
    report,
    spread,
)

TARGET = 0.8


def raw_log_read(db: Path, run_id: str, reps: int) -> list[float]:
    """Events per second of reading the run's rows with sqlite3 alone (no outlast code,
    no HTTP): the same query and pages as the replay, rows left as tuples."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        (rid,) = con.execute("SELECT rid FROM runs WHERE id = ?", (run_id,)).fetchone()
        query = ("SELECT seq, boundary, body FROM events WHERE rid = ? AND seq > ? "
                 "ORDER BY seq LIMIT 1000")
        rates = []
        for _ in range(reps):
            start = time.perf_counter()
            count, cursor = 0, 0
            while rows := con.execute(query, (rid, cursor)).fetchall():
                count += len(rows)
                cursor = rows[-1][0]
            rates.append(count / (time.perf_counter() - start))
        return rates
    finally:
        con.close()


async def measure(url: str, db: Path, events: int, reps: int) -> dict[str, Any]:
    async with client(url) as c:
        run_id, last = await finished_run(c, events)
        durable_path = f"/runs/{run_id}/events?follow=false"
        baseline_path = f"/bench/runs/{run_id}/events"
        sizes = set()
        for path in (durable_path, baseline_path):  # warm up; the baseline encodes here
            stats = await read_stream(c, "GET", path)
            sizes.add((stats.frames, stats.nbytes))
        if len(sizes) != 1 or next(iter(sizes))[0] != last:
            raise RuntimeError(f"replay and baseline differ: {sizes}, last seq {last}")
        durable: list[float] = []
        baseline: list[float] = []
        for rep in range(reps):
            order = [durable_path, baseline_path] if rep % 2 == 0 else \
                [baseline_path, durable_path]
            for path in order:
                stats = await read_stream(c, "GET", path)
                (durable if path == durable_path else baseline).append(
                    stats.frames / stats.elapsed)
        frames, nbytes = sizes.pop()
    raw = raw_log_read(db, run_id, reps)
    return {"events": frames, "bytes": nbytes, "reps": reps, "durable": durable, "raw": raw,
            "baseline": baseline, "ratio": median(durable) / median(baseline),
            "pair_ratios": [d / b for d, b in zip(durable, baseline, strict=True)]}


async def main_async(quick: bool) -> tuple[dict[str, Any], list[tuple[str, ...]]]:
    events = 20000
    reps = 3 if quick else 25
    rows: list[tuple[str, ...]] = [("case", "events", "MB", "reps", "replay ev/s median (min-max)",
             "pre-encoded ev/s median (min-max)", "ratio", f"≥ {TARGET}",
             "raw SQLite read ev/s (no HTTP)")]
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="outlast-bench-") as tmp, \
            Server.bench(Path(tmp)) as server:
        r = await measure(server.url, Path(tmp) / "outlast.db", events, reps)
    results["replay"] = r
    lo, hi = spread(r["durable"])
    blo, bhi = spread(r["baseline"])
    plo, phi = spread(r["pair_ratios"])
    rows.append(("follow=false, from seq 0", f"{r['events']:,}", f"{r['bytes'] / 1e6:.1f}",
                 str(reps), f"{fmt(median(r['durable']))} ({fmt(lo)}-{fmt(hi)})",
                 f"{fmt(median(r['baseline']))} ({fmt(blo)}-{fmt(bhi)})",
                 f"{r['ratio']:.2f} (pairs {plo:.2f}-{phi:.2f})",
                 "yes" if r["ratio"] >= TARGET else "NO", fmt(median(r["raw"]))))
    return results, rows


def main() -> None:
    ns = parser(__doc__).parse_args()
    results, rows = asyncio.run(main_async(ns.quick))
    report("replay of a finished run", results, rows, ns.json)


if __name__ == "__main__":
    main()
