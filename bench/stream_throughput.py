"""Durable streaming throughput of one run to one client, against no durability.

Durable: ``POST /agents/bench`` (admission, the fold, group commit to SQLite, lazy
boundary snapshots, publish after commit, the subscriber's page reads). Baseline:
``POST /bench/agents/bench`` on the same server: the same agent, the same events, the
same JSON and SSE frame encoding and the same SSE response, but no store.
Target: durable ≥ 0.8 x baseline (events per second, medians).

    python -m bench.stream_throughput [--quick]
"""

from __future__ import annotations

import asyncio
import tempfile
import uuid
from pathlib import Path
from typing import Any

from bench.agents import bench_input
from bench.common import Server, client, paired, paired_row, parser, read_stream, report

TARGET = 0.8


async def one(c: Any, path: str, events: int, yield_every: int) -> tuple[float, int]:
    tag = uuid.uuid4().hex[:10]
    body = bench_input(f"t-{tag}", f"r-{tag}", events, yield_every=yield_every)
    stats = await read_stream(c, "POST", path, json=body)
    if stats.status != 200:
        raise RuntimeError(f"{path} answered {stats.status}")
    return stats.frames / stats.elapsed, stats.frames


async def measure(url: str, events: int, reps: int, yield_every: int) -> dict[str, Any]:
    async with client(url) as c:
        for path in ("/agents/bench", "/bench/agents/bench"):  # warm up both paths
            await one(c, path, min(events, 2000), yield_every)
        durable: list[float] = []
        baseline: list[float] = []
        frames: set[int] = set()
        for rep in range(reps):
            order = ["/agents/bench", "/bench/agents/bench"]
            if rep % 2:
                order.reverse()
            for path in order:
                rate, n = await one(c, path, events, yield_every)
                frames.add(n)
                (durable if path == "/agents/bench" else baseline).append(rate)
    if len(frames) != 1:
        raise RuntimeError(f"durable and baseline streams differ in length: {frames}")
    return {"events": frames.pop(), "reps": reps, "yield_every": yield_every,
            "durable": durable, "baseline": baseline, **paired(durable, baseline)}


def row(label: str, r: dict[str, Any]) -> tuple[str, ...]:
    return paired_row(label, r, "durable", "baseline", TARGET)


async def main_async(quick: bool) -> tuple[dict[str, Any], list[tuple[str, ...]]]:
    events = 5000 if quick else 20000
    reps = 3 if quick else 9
    results: dict[str, Any] = {}
    rows: list[tuple[str, ...]] = [("case", "events/run", "reps", "durable ev/s median (min-max)",
             "baseline ev/s median (min-max)", "ratio", f"≥ {TARGET}")]
    # yield_every=1: the agent awaits between events, as one relaying a model's stream
    # does (the headline). yield_every=50: bursts of 50 events per await, where the
    # baseline coalesces as well as the durable path does.
    cases = [("FULL", 1), ("FULL", 50)]
    if not quick:
        cases += [("NORMAL", 1), ("NORMAL", 50)]
    for synchronous, yield_every in cases:
        with tempfile.TemporaryDirectory(prefix="outlast-bench-") as tmp, \
                Server.bench(Path(tmp), synchronous) as server:
            r = await measure(server.url, events, reps if synchronous == "FULL" else 5,
                              yield_every)
        key = f"synchronous={synchronous}, yield_every={yield_every}"
        results[key] = r
        rows.append(row(key, r))
    return results, rows


def main() -> None:
    ns = parser(__doc__).parse_args()
    results, rows = asyncio.run(main_async(ns.quick))
    report("durable streaming throughput (one run, one client)", results, rows, ns.json)


if __name__ == "__main__":
    main()
