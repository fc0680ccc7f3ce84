"""Scale at a model's pace: N concurrent runs, each emitting 30 events/s, each watched
by one client; how late events arrive, what the server spends, what a run holds.

For each N, fresh ``outlast serve`` processes (``--agent paced=bench.agents:
paced_factory``) get N runs of the paced agent (``bench.agents.PacedAgent``: a message
of 20 stamped tokens, a tool call with its result, a state delta, on an absolute 30
events/s schedule) from raw-socket load clients (``bench.loadclient pace``, separate
processes). The runs start evenly over a ramp; after a settling pause, a window of
wall-clock time is measured:

- emit → receipt latency of every content event received in the window (p50, p99,
  max), and how late the agents emitted against their schedule (the event loop's lag);
- errors: runs that did not answer 200 or end with ``RUN_FINISHED``;
- server CPU over the window (``/proc/<pid>/stat``; on PostgreSQL the database's own
  processes separately), as % of one core and µs per delivered event;
- RSS in mid-window over the idle RSS of the same processes, per running run.

Backends: SQLite (one process); PostgreSQL, one process and two processes on one
database with the runs split between them, when the PostgreSQL server binaries are
installed (``tests/support/postgres.py``), else skipped with the reason; and, as the
floor, the same load on ``bench.server``'s no-store route (``POST /bench/agents/paced``:
same agent, encoding and SSE response, nothing stored). Climbing
stops after the first step whose p99 exceeds 1 s or that had errors.

Target: N ≥ 2,000 on one process with p99 ≤ 100 ms and no errors; ≤ 30 KB per run.

``--held`` asks how many runs each shape holds (p99 ≤ 100 ms, no errors) in one run:
the durable server (``outlast serve``), the guarded floor (``bench.floor_guarded``: the
floor plus the guarantees' own work, done plainly), the floor (``bench.floor``: the
bare path plus a SQLite commit before each event is shown) and the bare path climb one
ladder of N together, each stopping at its first step that fails; the ratios to the bare path's
are what a change to the durable path can be held to.

    python -m bench.model_pace [--quick] [--plots DIR] [--steps 100 300 ...] [--history 60]
    python -m bench.model_pace --held [--quick] [--steps 100 200 ...] [--window 6]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import ROOT, Server, fmt, machine_speed, parser, postgres_cluster, report, rss_mb
from bench.loadclient import BUCKET, hist_percentile, merge, proc_cpu, raise_nofile

RATE = 30.0
P99_MS, RSS_KB = 100.0, 30.0
STOP_P99_MS = 1000.0
PLOTS = ROOT / "docs" / "perf"


def descendants(root: int) -> list[int]:
    """``root`` and every process below it (the PostgreSQL postmaster's backends)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += children.get(pid, [])
    return out


def tree_cpu(root: int | None) -> float:
    if root is None:
        return 0.0
    total = 0.0
    for pid in descendants(root):
        try:
            total += proc_cpu(pid)
        except OSError:
            pass
    return total


def warm_up(url: str) -> None:
    import asyncio

    from bench.agents import paced_input
    from bench.loadclient import Record, rounds

    record = Record()
    asyncio.run(rounds(url, "/agents/paced",
                       lambda t: paced_input(f"t-{t}", f"r-{t}", 100, rate=0), 2, 1, record))
    if record.errors:
        raise RuntimeError(f"warm-up failed: {record.errors[0]}")


def step(servers: list[Server], n: int, window_s: float, client_procs: int,
         db_root: int | None, path: str, history: int = 0) -> dict[str, Any]:
    """One point of the curve on already started (and warmed-up) servers."""
    idle = sum(rss_mb(s.pid) for s in servers)
    speed = machine_speed()  # before the load: how fast the machine is at this step
    ramp = max(2.0, n / 250)
    settle = 3.0
    lasts = ramp + settle + window_s + 2.0
    events = int(RATE * lasts)
    t0 = time.time() + 1.5  # the clients' start-up
    window = (t0 + ramp + settle, t0 + ramp + settle + window_s)
    share = [n // client_procs + (1 if i < n % client_procs else 0)
             for i in range(client_procs)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT),
                                                        os.environ.get("PYTHONPATH", "")])}
    clients = [subprocess.Popen(
        [sys.executable, "-m", "bench.loadclient", "pace",
         *[a for s in servers for a in ("--url", s.url)], "--runs", str(k), "--path", path,
         "--rate", str(RATE), "--events", str(events), "--t0", str(t0), "--ramp", str(ramp),
         "--window", str(window[0]), str(window[1]), "--timeout", "90",
         "--history", str(history)],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True) for k in share if k]

    def at(t: float) -> None:
        time.sleep(max(0.0, t - time.time()))

    at(window[0])
    cpu0 = [proc_cpu(s.pid) for s in servers]
    db0 = tree_cpu(db_root)
    at((window[0] + window[1]) / 2)
    rss = sum(rss_mb(s.pid) for s in servers)
    at(window[1])
    cpu = [proc_cpu(s.pid) - c for s, c in zip(servers, cpu0, strict=True)]
    db = tree_cpu(db_root) - db0
    outs = []
    for c in clients:
        out, _ = c.communicate(timeout=lasts + 150)
        if c.returncode != 0:
            raise RuntimeError(f"load client exited {c.returncode}")
        outs.append(json.loads(out.strip().splitlines()[-1]))
    lat = merge(o["latency"] for o in outs)
    lag = merge(o["lag"] for o in outs)
    first = merge(o["first"] for o in outs)
    frames = sum(o["frames"] for o in outs)
    win = window_s
    return {
        "n": n, "events_per_run": events, "ramp_s": ramp, "window_s": win,
        "events_per_s": frames / win, "expected_per_s": n * RATE,
        "p50_ms": hist_percentile(lat, 0.5) * 1e3, "p99_ms": hist_percentile(lat, 0.99) * 1e3,
        "max_ms": (max(lat) + 1) * BUCKET * 1e3 if lat else float("nan"),
        "lag_p99_ms": hist_percentile(lag, 0.99) * 1e3,
        "first_p99_ms": hist_percentile(first, 0.99) * 1e3,
        "errors": sum(o["error_count"] for o in outs),
        "error_samples": [e for o in outs for e in o["errors"]][:5],
        "ramp_late_s": max(o["ramp_late"] for o in outs),
        "server_cpu_pct": [c / win * 100 for c in cpu],
        "server_us_per_event": sum(cpu) / max(frames, 1) * 1e6,
        "db_cpu_pct": db / win * 100 if db_root is not None else None,
        "client_cpu_pct": sum(o["client_cpu"] for o in outs) / win * 100,
        "rss_mb": rss, "idle_rss_mb": idle, "rss_kb_per_run": (rss - idle) * 1024 / n,
        "machine_speed_ms": speed,
    }


Start = Callable[[Path, int], tuple[list[Server], int | None]]


def point(name: str, n: int, window_s: float, client_procs: int, start: Start,
          path: str = "/agents/paced", history: int = 0) -> dict[str, Any]:
    """One step on fresh servers, started, warmed up and stopped here."""
    with tempfile.TemporaryDirectory(prefix="outlast-pace-") as tmp:
        servers, db_root = start(Path(tmp), n)
        try:
            for s in servers:
                warm_up(s.url)
            time.sleep(0.5)
            p = step(servers, n, window_s, client_procs, db_root, path, history)
        finally:
            for s in servers:
                s.stop()
    p["backend"] = name
    print(f"  {name} N={n}: p99 {p['p99_ms']:.1f} ms, {p['events_per_s']:,.0f} ev/s, "
          f"machine speed {p['machine_speed_ms']:.1f} ms, "
          f"server {'+'.join(f'{c:.0f}' for c in p['server_cpu_pct'])} % CPU, "
          f"{p['server_us_per_event']:.0f} µs/event, {p['errors']} errors", flush=True)
    return p


def holds(p: dict[str, Any]) -> bool:
    """The step's runs were held: p99 emit → receipt within the target, no errors."""
    return p["p99_ms"] <= P99_MS and not p["errors"]


def curve(name: str, steps: list[int], window_s: float, client_procs: int, start: Start,
          path: str = "/agents/paced", history: int = 0) -> list[dict[str, Any]]:
    if history:
        name = f"{name}, {history}-message history"
    points = []
    for n in steps:
        p = point(name, n, window_s, client_procs, start, path, history)
        points.append(p)
        if p["errors"] or p["p99_ms"] > STOP_P99_MS:
            break  # saturated: the next step only takes longer to say so
    return points


def on_sqlite(root: Path, n: int) -> tuple[list[Server], int | None]:
    """A durable ``outlast serve`` on SQLite, for ``n`` runs."""
    return [serve(root, "sqlite", n)], None


def on_bench_server(root: Path, n: int) -> tuple[list[Server], int | None]:
    """``bench.server``: the bare path, the floor and the guarded floor's routes."""
    return [Server.bench(root).start()], None


HELD_STEPS = [100, 200, 300, 400, 500, 600, 800, 1000, 1200, 1500, 2000]
SHAPES: dict[str, tuple[Start, str]] = {
    "durable": (on_sqlite, "/agents/paced"),
    "guarded": (on_bench_server, "/bench/floor-guarded/paced"),
    "floor": (on_bench_server, "/bench/floor/paced"),
    "bare": (on_bench_server, "/bench/agents/paced"),
}


def held(steps: list[int], window_s: float, client_procs: int) -> dict[str, Any]:
    """How many runs each shape holds at p99 ≤ ``P99_MS`` with no errors: every shape
    still holding takes each step of the ladder, their order reversed every other step,
    so their ceilings are measured alike in one run. A shape stops at its first
    step that fails, and holds the step before it."""
    holding = {name: 0 for name in SHAPES}
    live = list(SHAPES)
    points = []
    for i, n in enumerate(steps):
        for name in (live if i % 2 == 0 else live[::-1]):
            start, path = SHAPES[name]
            p = point(name, n, window_s, client_procs, start, path)
            points.append(p)
            if holds(p):
                holding[name] = n
        live = [name for name in live if holding[name] == n]
        if not live:
            break
    return {"held": holding, "points": points, "steps": steps}


def held_main(steps: list[int], window_s: float, client_procs: int, out: Path | None) -> None:
    load = os.getloadavg()[0]
    started = time.monotonic()
    result = held(steps, window_s, client_procs)
    result.update(load_before=load, load_after=os.getloadavg()[0],
                  seconds=time.monotonic() - started)
    got = result["held"]
    table: list[tuple[str, ...]] = [("shape", "runs held", "of the bare path's")]
    for name in SHAPES:
        ratio = got[name] / got["bare"] if got["bare"] else float("nan")
        table.append((name, f"{got[name]:,}" + ("+" if got[name] == steps[-1] else ""),
                      f"{ratio:.2f}"))
    print(f"load average: {load:.2f} before, {result['load_after']:.2f} after; "
          f"{result['seconds']:.0f} s")
    report(f"runs held at a model's pace (p99 ≤ {P99_MS:.0f} ms, no errors), one run",
           result, rows(result["points"]), out)
    report("runs held", {}, table, None)


def serve(root: Path, name: str, n: int, *store: str) -> Server:
    return Server.outlast(root / name, "--agent", "paced=bench.agents:paced_factory",
                          "--max-runs", str(n + 100), *store).start()


def rows(points: list[dict[str, Any]]) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = [(
        "backend", "N runs", "events/s (of 30 N)", "p50 ms", "p99 ms", "max ms",
        "agent lag p99 ms", "first event p99 ms", "errors", "server CPU %",
        "server µs/event", "PostgreSQL CPU %", "client CPU %", "RSS MB", "KB per run",
        f"p99 ≤ {P99_MS:.0f}, no errors", "machine speed ms")]
    for p in points:
        db = "" if p["db_cpu_pct"] is None else fmt(p["db_cpu_pct"])
        out.append((p["backend"], f"{p['n']:,}",
                    f"{fmt(p['events_per_s'])} ({fmt(p['expected_per_s'])})",
                    fmt(p["p50_ms"], digits=1), fmt(p["p99_ms"], digits=1),
                    fmt(p["max_ms"], digits=0), fmt(p["lag_p99_ms"], digits=1),
                    fmt(p["first_p99_ms"], digits=1), str(p["errors"]),
                    " + ".join(fmt(c) for c in p["server_cpu_pct"]),
                    fmt(p["server_us_per_event"]), db, fmt(p["client_cpu_pct"]),
                    fmt(p["rss_mb"], digits=1), fmt(p["rss_kb_per_run"], digits=1),
                    "yes" if holds(p) else "NO",
                    fmt(p["machine_speed_ms"], digits=1)))
    return out


def plots(points: list[dict[str, Any]], where: Path) -> None:
    from bench.plot import line_chart

    by: dict[str, list[dict[str, Any]]] = {}
    for p in points:
        by.setdefault(p["backend"], []).append(p)
    line_chart(where / "model-pace-p99.svg",
               "Runs at 30 events/s, one client each: p99 emit → receipt",
               "concurrent runs (N)", "p99 latency, ms (log)",
               {b: [(p["n"], p["p99_ms"]) for p in ps] for b, ps in by.items()},
               log_y=True, hline=(P99_MS, f"target {P99_MS:.0f} ms"))
    line_chart(where / "model-pace-cpu.svg",
               "Runs at 30 events/s, one client each: server CPU per event",
               "concurrent runs (N)", "server CPU per delivered event, µs",
               {b: [(p["n"], p["server_us_per_event"]) for p in ps] for b, ps in by.items()})


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--steps", type=int, nargs="+", help="values of N")
    p.add_argument("--window", type=float, help="seconds measured per step")
    p.add_argument("--client-procs", type=int, default=1, help="load client processes")
    p.add_argument("--plots", type=Path, help=f"write SVG charts here (full run: {PLOTS})")
    p.add_argument("--no-postgres", action="store_true")
    p.add_argument("--history", type=int, default=0,
                   help="messages each run's input resends (bench.agents.resent_history; 60 "
                        "is about 36 KB of JSON), as AG-UI front ends resend the conversation")
    p.add_argument("--no-baseline", action="store_true",
                   help="skip the no-store curve (POST /bench/agents/paced on bench.server)")
    p.add_argument("--held", action="store_true",
                   help="how many runs durable, the guarded floor, the floor and the bare "
                        f"path hold at p99 ≤ {P99_MS:.0f} ms, climbing one ladder together "
                        f"(default steps {' '.join(map(str, HELD_STEPS))})")
    ns = p.parse_args()
    if ns.held:
        raise_nofile(max(ns.steps or HELD_STEPS) * 3 + 512)
        held_main(ns.steps or ([100, 200] if ns.quick else HELD_STEPS),
                  ns.window or (4.0 if ns.quick else 6.0), ns.client_procs, ns.json)
        return
    steps = ns.steps or ([100] if ns.quick else [100, 300, 1000, 2000])
    pg_steps = ns.steps or ([100] if ns.quick else [100, 300, 1000])
    window_s = ns.window or (4.0 if ns.quick else 10.0)
    raise_nofile(max(steps) * 3 + 512)
    load = os.getloadavg()[0]
    started = time.monotonic()
    points = curve("SQLite, 1 process", steps, window_s, ns.client_procs, on_sqlite,
                   history=ns.history)
    if not ns.no_baseline:
        points += curve("no store (baseline)", steps, window_s, ns.client_procs,
                        on_bench_server, "/bench/agents/paced", history=ns.history)
    skipped = ""
    if ns.no_postgres:
        skipped = "PostgreSQL: skipped (--no-postgres)"
    else:
        with postgres_cluster() as (cluster, skipped):
            if cluster is not None:
                pid = cluster.proc.pid if cluster.proc else None

                def one(root: Path, n: int) -> tuple[list[Server], int | None]:
                    url = cluster.fresh_database("pace")
                    return [serve(root, "pg", n, "--store", url)], pid

                def two(root: Path, n: int) -> tuple[list[Server], int | None]:
                    url = cluster.fresh_database("pace")
                    return [serve(root, "a", n, "--store", url),
                            serve(root, "b", n, "--store", url)], pid

                points += curve("PostgreSQL, 1 process", pg_steps, window_s,
                                ns.client_procs, one, history=ns.history)
                points += curve("PostgreSQL, 2 processes", pg_steps, window_s,
                                ns.client_procs, two, history=ns.history)
    out = {"points": points, "skipped": skipped, "load_before": load,
           "load_after": os.getloadavg()[0], "seconds": time.monotonic() - started}
    # Only a full run redraws the committed charts (a run of some steps would replace them).
    where = ns.plots or (None if ns.quick or ns.steps or ns.no_postgres or ns.history
                         else PLOTS)
    if where is not None:
        plots(points, where)
        print(f"charts: {where / 'model-pace-p99.svg'}, {where / 'model-pace-cpu.svg'}")
    if skipped:
        print(skipped)
    print(f"load average: {load:.2f} before, {out['load_after']:.2f} after; "
          f"{out['seconds']:.0f} s")
    report("model pace: N runs at 30 events/s, one client each", out, rows(points), ns.json)


if __name__ == "__main__":
    main()
