"""Retention soak (spec §6): with a short ``--event-retention``, the store stays bounded
under a steady load, and collecting never holds live streams up.

Real ``outlast serve`` processes on SQLite and on a throwaway PostgreSQL
(``tests/support/postgres.py``, durable settings; skipped when its binaries are
missing). Per backend, two passes over the same load:

- ``retention``: ``--event-retention W``; the upkeep collects every max(W/4, 1 s).
- ``keep``: no retention, over a fifth of the runs: how the store grows without it.
  Then, with live runs followed, ``POST /admin/gc`` removes everything it kept: the
  live events' delay while that gc runs against their delay just before it.

The load: ``--runs`` runs of about ``--events`` events each, ``--workers`` at a time,
each streamed to its end by its client. Beside it, ``--live`` paced runs are followed
live the whole time, every event stamped with the time the agent emitted it; the
delay per event is its arrival at the client minus that stamp. Every ``--sample``
runs: the SQLite file (database plus WAL) or PostgreSQL's ``events`` table
(``pg_total_relation_size``) and database size.

    python bench/retention_soak.py [--quick] [--backends sqlite,postgres]

Writes docs/perf/retention_soak.json and the plot docs/perf/retention_soak.svg.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.bench_postgres import (  # noqa: E402
    client,
    count_frames,
    fast_input,
    p99,
    stamped_arrivals,
)
from bench.common import Server, median, postgres_cluster  # noqa: E402

OUT = ROOT / "docs" / "perf"
AGENT = "fast=bench.bench_postgres:factory"


def sqlite_bytes(data_dir: Path) -> int:
    return sum(p.stat().st_size for p in data_dir.glob("outlast.db*") if p.is_file()
               and not p.name.endswith(".lock"))


async def pg_bytes(url: str) -> tuple[int, int]:
    import asyncpg

    con = await asyncpg.connect(url)
    try:
        row = await con.fetchrow("SELECT pg_total_relation_size('events') AS events, "
                                 "pg_database_size(current_database()) AS db")
        assert row is not None
        return int(row["events"]), int(row["db"])
    finally:
        await con.close()


async def soak(url: str, measure: Any, opts: argparse.Namespace) -> dict[str, Any]:
    """The load, the live followers and the size samples of one server."""
    samples: list[dict[str, Any]] = []
    delays: list[float] = []
    done = 0
    written = 0  # frames the load's clients received: ~ events written
    stop = asyncio.Event()
    started = time.perf_counter()

    async def worker(c: Any, share: int) -> None:
        nonlocal done, written
        for _ in range(share):
            frames, _ = await count_frames(c, "POST", "/agents/fast",
                                           json=fast_input(opts.events, tokens=20))
            written += frames
            done += 1
            if done % opts.sample == 0:
                size = await measure()
                samples.append({"runs": done, "events_written": written,
                                "seconds": round(time.perf_counter() - started, 1), **size})
                print(f"  {done:6d} runs  {json.dumps(size)}", flush=True)

    async def live(c: Any) -> None:
        while not stop.is_set():
            body = fast_input(opts.live_events, tokens=50, pace_ms=opts.pace_ms, stamp=True)
            arrivals = await stamped_arrivals(c, "POST", "/agents/fast", json=body)
            delays.extend(got - sent for sent, got in arrivals.values())

    async with client(url) as c:
        followers = [asyncio.create_task(live(c)) for _ in range(opts.live)]
        shares = [opts.runs // opts.workers + (i < opts.runs % opts.workers)
                  for i in range(opts.workers)]
        await asyncio.gather(*(worker(c, s) for s in shares))
        stop.set()
        await asyncio.gather(*followers)
    return {"samples": samples, "seconds": round(time.perf_counter() - started, 1),
            "live_events": len(delays),
            "delay_ms": {"median": round(median(delays) * 1000, 2),
                         "p99": round(p99(delays) * 1000, 2),
                         "max": round(max(delays) * 1000, 2)}}


async def gc_under_live_traffic(url: str, opts: argparse.Namespace) -> dict[str, Any]:
    """Live followed runs, first alone for a while, then while ``POST /admin/gc``
    removes the whole backlog the keep pass left: per-event delay in each period."""
    delays: list[tuple[float, float]] = []  # (arrived at, delay)
    stop = asyncio.Event()

    async def live(c: Any) -> None:
        while not stop.is_set():
            body = fast_input(opts.live_events, tokens=50, pace_ms=opts.pace_ms, stamp=True)
            arrivals = await stamped_arrivals(c, "POST", "/agents/fast", json=body)
            delays.extend((got, got - sent) for sent, got in arrivals.values())

    async with client(url) as c:
        followers = [asyncio.create_task(live(c)) for _ in range(opts.live)]
        await asyncio.sleep(opts.baseline_seconds)
        gc_start = time.time()
        report = (await c.post("/admin/gc", params={"olderThan": "1e-6"})).json()
        gc_end = time.time()
        await asyncio.sleep(1)
        stop.set()
        await asyncio.gather(*followers)
    alone = [d for t, d in delays if t < gc_start]
    during = [d for t, d in delays if gc_start <= t <= gc_end]

    def stats(values: list[float]) -> dict[str, float]:
        if not values:
            return {}
        return {"events": len(values), "median": round(median(values) * 1000, 2),
                "p99": round(p99(values) * 1000, 2), "max": round(max(values) * 1000, 2)}

    return {"gc_seconds": round(gc_end - gc_start, 2), "freed": report,
            "delay_ms_alone": stats(alone), "delay_ms_during_gc": stats(during)}


def run_backend(root: Path, name: str, store_args: list[str], measure: Any,
                opts: argparse.Namespace, retention: bool) -> dict[str, Any]:
    """One pass: the soak with retention, or the keep pass (fewer runs, no retention)
    followed by a gc of everything it kept under live traffic."""
    args = ["--event-retention", str(opts.window)] if retention else []
    with Server.outlast(root / name, *store_args, "--agent", AGENT, *args) as server:
        if retention:
            return asyncio.run(soak(server.url, measure, opts))
        keep = argparse.Namespace(**{**vars(opts), "runs": opts.keep_runs})
        result = asyncio.run(soak(server.url, measure, keep))
        result["gc_under_live_traffic"] = asyncio.run(gc_under_live_traffic(server.url, opts))
        print(f"  gc under live traffic: {result['gc_under_live_traffic']}", flush=True)
        return result


def run_sqlite(root: Path, opts: argparse.Namespace, retention: bool) -> dict[str, Any]:
    name = "sqlite-retention" if retention else "sqlite-keep"

    async def measure() -> dict[str, Any]:
        return {"sqlite_bytes": sqlite_bytes(root / name)}

    return run_backend(root, name, [], measure, opts, retention)


def run_postgres(cluster: Any, root: Path, opts: argparse.Namespace,
                 retention: bool) -> dict[str, Any]:
    url = cluster.fresh_database("soak")

    async def measure() -> dict[str, Any]:
        events, db = await pg_bytes(url)
        return {"events_table_bytes": events, "database_bytes": db}

    name = "pg-retention" if retention else "pg-keep"
    return run_backend(root, name, ["--store", url], measure, opts, retention)


# -- the plot ------------------------------------------------------------------------

W, H, PAD_L, PAD_R, PAD_T, PAD_B = 720, 360, 70, 180, 30, 50
SERIES = [  # (backend, pass, key, label, colour, dashed)
    ("sqlite", "keep", "sqlite_bytes", "SQLite file, no retention", "#d62728", True),
    ("sqlite", "retention", "sqlite_bytes", "SQLite file, retention", "#d62728", False),
    ("postgres", "keep", "events_table_bytes", "PG events table, no retention", "#1f77b4",
     True),
    ("postgres", "retention", "events_table_bytes", "PG events table, retention",
     "#1f77b4", False),
]


def svg(results: dict[str, Any], window: float) -> str:
    """A line chart of store size against runs completed, written by hand."""
    lines = []
    points: list[tuple[str, str, bool, list[tuple[int, float]]]] = []
    for backend, phase, key, label, colour, dashed in SERIES:
        samples = results.get(backend, {}).get(phase, {}).get("samples", [])
        pts = [(s["runs"], s[key] / 1e6) for s in samples if key in s]
        if pts:
            points.append((label, colour, dashed, pts))
    if not points:
        return ""
    xmax = max(x for *_, pts in points for x, _ in pts)
    ymax = max(y for *_, pts in points for _, y in pts) * 1.1 or 1.0
    pw, ph = W - PAD_L - PAD_R, H - PAD_T - PAD_B

    def xy(x: float, y: float) -> str:
        return f"{PAD_L + pw * x / xmax:.1f},{PAD_T + ph * (1 - y / ymax):.1f}"

    lines.append(f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
                 f'font-family="sans-serif" font-size="12">')
    lines.append(f'<rect width="{W}" height="{H}" fill="white"/>')
    lines.append(f'<text x="{PAD_L}" y="18" font-size="14">Store size under a steady load '
                 f'(retention window {window:g} s)</text>')
    for i in range(6):
        y = ymax * i / 5
        lines.append(f'<line x1="{PAD_L}" x2="{PAD_L + pw}" y1="{xy(0, y).split(",")[1]}" '
                     f'y2="{xy(0, y).split(",")[1]}" stroke="#ddd"/>')
        lines.append(f'<text x="{PAD_L - 6}" y="{float(xy(0, y).split(",")[1]) + 4:.1f}" '
                     f'text-anchor="end">{y:.0f}</text>')
        x = xmax * i / 5
        lines.append(f'<text x="{xy(x, 0).split(",")[0]}" y="{PAD_T + ph + 18}" '
                     f'text-anchor="middle">{x:.0f}</text>')
    lines.append(f'<text x="{PAD_L + pw / 2}" y="{H - 8}" text-anchor="middle">'
                 'runs completed</text>')
    lines.append(f'<text x="16" y="{PAD_T + ph / 2}" text-anchor="middle" '
                 f'transform="rotate(-90 16 {PAD_T + ph / 2})">MB</text>')
    lines.append(f'<rect x="{PAD_L}" y="{PAD_T}" width="{pw}" height="{ph}" fill="none" '
                 'stroke="#888"/>')
    for n, (label, colour, dashed, pts) in enumerate(points):
        dash = ' stroke-dasharray="6 4"' if dashed else ""
        path = " ".join(xy(x, y) for x, y in pts)
        lines.append(f'<polyline points="{path}" fill="none" stroke="{colour}" '
                     f'stroke-width="2"{dash}/>')
        ly = PAD_T + 16 + 20 * n
        lines.append(f'<line x1="{W - PAD_R + 10}" x2="{W - PAD_R + 34}" y1="{ly}" y2="{ly}" '
                     f'stroke="{colour}" stroke-width="2"{dash}/>')
        lines.append(f'<text x="{W - PAD_R + 40}" y="{ly + 4}">{label}</text>')
    lines.append("</svg>")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--quick", action="store_true", help="1,000 runs: a smoke run")
    ap.add_argument("--runs", type=int)
    ap.add_argument("--events", type=int, default=200, help="events per load run")
    ap.add_argument("--window", type=float, default=2.0, help="--event-retention, seconds")
    ap.add_argument("--workers", type=int, default=4, help="load runs at once")
    ap.add_argument("--live", type=int, default=2, help="live followed runs at once")
    ap.add_argument("--live-events", type=int, default=200)
    ap.add_argument("--pace-ms", type=float, default=5.0, help="live runs' pace")
    ap.add_argument("--sample", type=int, help="sample sizes every N runs")
    ap.add_argument("--keep-runs", type=int, help="runs of the pass without retention "
                    "(default a fifth of --runs): the growth baseline and gc's backlog")
    ap.add_argument("--baseline-seconds", type=float, default=5.0,
                    help="live traffic alone before gc starts")
    ap.add_argument("--backends", default="sqlite,postgres")
    ap.add_argument("--no-write", action="store_true", help="do not write docs/perf/")
    opts = ap.parse_args()
    opts.runs = opts.runs or (1000 if opts.quick else 10_000)
    opts.sample = opts.sample or max(1, opts.runs // 10)
    opts.keep_runs = opts.keep_runs or max(opts.sample, opts.runs // 5)
    backends = opts.backends.split(",")

    print(f"machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}; "
          f"{opts.runs} runs x ~{opts.events} events, window {opts.window:g} s")
    results: dict[str, Any] = {"config": {k: v for k, v in vars(opts).items()
                                          if k not in ("quick", "no_write")}}
    with tempfile.TemporaryDirectory(prefix="outlast-soak-") as tmp:
        root = Path(tmp)
        if "sqlite" in backends:
            results["sqlite"] = {}
            for retention in (True, False):
                phase = "retention" if retention else "keep"
                print(f"sqlite, {phase}:", flush=True)
                results["sqlite"][phase] = run_sqlite(root, opts, retention)
        if "postgres" in backends:
            with postgres_cluster() as (cluster, skipped):
                if cluster is None:
                    print(skipped)
                else:
                    results["postgres"] = {}
                    for retention in (True, False):
                        phase = "retention" if retention else "keep"
                        print(f"postgres, {phase}:", flush=True)
                        results["postgres"][phase] = run_postgres(cluster, root, opts,
                                                                  retention)
    for backend in ("sqlite", "postgres"):
        for phase, r in results.get(backend, {}).items():
            print(f"{backend:8s} {phase:9s} {r['seconds']:7.1f} s  live delay ms "
                  f"{r['delay_ms']}  last sample {r['samples'][-1] if r['samples'] else {}}")
            if "gc_under_live_traffic" in r:
                print(f"{'':18s} gc under live traffic: {r['gc_under_live_traffic']}")
    if not opts.no_write:
        OUT.mkdir(parents=True, exist_ok=True)
        (OUT / "retention_soak.json").write_text(json.dumps(results, indent=1) + "\n")
        (OUT / "retention_soak.svg").write_text(svg(results, opts.window))
        print(f"wrote {OUT / 'retention_soak.json'} and {OUT / 'retention_soak.svg'}")


if __name__ == "__main__":
    main()
