"""Latency under load: emit → receipt per event, and time to the first event, at 1, 10
and 100 concurrent full-speed runs; durable against no store, with CPU per event.

Both paths run the paced agent (``bench.agents.PacedAgent``) at full speed (rate 0) on
one ``bench.server``: durable ``POST /agents/paced`` and its no-store twin ``POST
/bench/agents/paced`` (same agent, same encoding and SSE response, nothing stored).
Every content delta carries the wall time it was emitted; the load client
(``bench.loadclient``, raw asyncio, this process) notes the time each frame arrives.

- per-event latency: emit → receipt, p50/p99 over every content event of the case;
- first-event latency: request sent (connection open) → first stored event, per run
  (p50, p99 and the slowest run);
- events/s: frames of all runs over the case's wall time; CPU per event: the
  server's utime + stime (``/proc/<pid>/stat``) over the case, per frame.

Shapes: ``stream`` (the agent awaits after every event) at 1, 10 and 100 concurrent
runs; ``burst`` (an await every 50 events) at 1 and 10.
Targets: first event p99 ≤ 10 ms for one run and ≤ 30 ms at 10; every-event p99
≤ 50 ms at 10; durable ≥ 1.0x the baseline's events/s and ≤ 1.2x its CPU per event
(1 and 10 runs, both shapes).

    python -m bench.latency [--quick]
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.agents import paced_input
from bench.common import Server, fmt, parser, report
from bench.loadclient import Record, cpu_seconds, percentile, proc_cpu, raise_nofile, rounds

DURABLE, BASELINE = "/agents/paced", "/bench/agents/paced"
SHAPES = {"stream": 1, "burst": 50}
FIRST_P99_MS = {1: 10.0, 10: 30.0}
EVENT_P99_MS = {10: 50.0}
RATIO_MIN, CPU_MAX = 1.0, 1.2


async def case(server: Server, path: str, yield_every: int, concurrency: int, count: int,
               events: int) -> dict[str, Any]:
    def body(t: str) -> dict[str, Any]:
        return paced_input(f"t-{t}", f"r-{t}", events, rate=0, yield_every=yield_every)

    record = Record()
    cpu0, mine0 = proc_cpu(server.pid), cpu_seconds()
    wall = await rounds(server.url, path, body, concurrency, count, record)
    server_cpu, client_cpu = proc_cpu(server.pid) - cpu0, cpu_seconds() - mine0
    lat, first = sorted(record.latency), sorted(record.first)
    frames = max(record.frames, 1)
    return {
        "runs": concurrency * count, "frames": record.frames, "errors": record.errors[:5],
        "error_count": len(record.errors), "events_per_s": record.frames / wall,
        "server_us_per_event": server_cpu / frames * 1e6,
        "client_us_per_event": client_cpu / frames * 1e6,
        "event_p50_ms": percentile(lat, 0.5) * 1e3, "event_p99_ms": percentile(lat, 0.99) * 1e3,
        "first_p50_ms": percentile(first, 0.5) * 1e3, "first_p99_ms": percentile(first, 0.99) * 1e3,
        "first_max_ms": (first[-1] if first else float("nan")) * 1e3,
    }


async def measure(server: Server, quick: bool) -> dict[str, Any]:
    events = 500 if quick else 1000
    # (shape, concurrency, rounds): enough runs for a first-event p99 at one run.
    plan = [("stream", 1, 8 if quick else 30), ("stream", 10, 2 if quick else 5),
            ("stream", 100, 1), ("burst", 1, 8 if quick else 30),
            ("burst", 10, 2 if quick else 5)]
    for path in (DURABLE, BASELINE):  # warm up both paths
        await case(server, path, 1, 2, 1, events)
    results: dict[str, Any] = {}
    for i, (shape, conc, count) in enumerate(plan):
        order = [DURABLE, BASELINE] if i % 2 == 0 else [BASELINE, DURABLE]
        for path in order:
            key = f"{shape}/{conc}/{'durable' if path == DURABLE else 'baseline'}"
            results[key] = await case(server, path, SHAPES[shape], conc, count, events)
            await asyncio.sleep(0.2)  # let the durable runs' last writes settle
    return results


def verdict(ok: bool) -> str:
    return "yes" if ok else "NO"


def tables(results: dict[str, Any]) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = [(
        "shape", "runs at once", "path", "runs", "events/s", "server µs/event",
        "client µs/event", "event p50 ms", "event p99 ms", "first p50 ms", "first p99 ms",
        "first max ms", "errors", "targets met")]
    order = sorted(results, key=lambda k: (k.split("/")[0] != "stream", int(k.split("/")[1]),
                                           k.split("/")[2] != "durable"))
    for key in order:
        r = results[key]
        shape, conc, path = key.split("/")
        n = int(conc)
        checks = []
        if path == "durable":
            if n in FIRST_P99_MS:
                checks.append(f"first p99 ≤ {FIRST_P99_MS[n]:.0f}: "
                              f"{verdict(r['first_p99_ms'] <= FIRST_P99_MS[n])}")
            if n in EVENT_P99_MS:
                checks.append(f"event p99 ≤ {EVENT_P99_MS[n]:.0f}: "
                              f"{verdict(r['event_p99_ms'] <= EVENT_P99_MS[n])}")
            base = results[f"{shape}/{conc}/baseline"]
            if n in (1, 10):
                ratio = r["events_per_s"] / base["events_per_s"]
                cpu = r["server_us_per_event"] / base["server_us_per_event"]
                checks.append(f"ev/s {ratio:.2f}x ≥ {RATIO_MIN}: {verdict(ratio >= RATIO_MIN)}")
                checks.append(f"CPU {cpu:.2f}x ≤ {CPU_MAX}: {verdict(cpu <= CPU_MAX)}")
        rows.append((shape, conc, path, str(r["runs"]), fmt(r["events_per_s"]),
                     fmt(r["server_us_per_event"], digits=1),
                     fmt(r["client_us_per_event"], digits=1),
                     fmt(r["event_p50_ms"], digits=1), fmt(r["event_p99_ms"], digits=1),
                     fmt(r["first_p50_ms"], digits=1), fmt(r["first_p99_ms"], digits=1),
                     fmt(r["first_max_ms"], digits=1), str(r["error_count"]),
                     "; ".join(checks)))
    return rows


async def main_async(quick: bool) -> dict[str, Any]:
    raise_nofile(1024)
    load = os.getloadavg()[0]
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="outlast-bench-") as tmp, \
            Server.bench(Path(tmp)) as server:
        results = await measure(server, quick)
    return {"cases": results, "load_before": load, "load_after": os.getloadavg()[0],
            "seconds": time.monotonic() - started}


def main() -> None:
    ns = parser(__doc__).parse_args()
    out = asyncio.run(main_async(ns.quick))
    print(f"load average: {out['load_before']:.2f} before, {out['load_after']:.2f} after; "
          f"{out['seconds']:.0f} s")
    report("latency under load (full-speed runs, durable vs no store)", out,
           tables(out["cases"]), ns.json)


if __name__ == "__main__":
    main()
