"""outlast against its peers, each started here when installed: one run's events/s,
server CPU per 1,000 events, and time to the first event (one run; 10 at once).

Peers, all streaming full-speed text deltas stamped with their emit time over HTTP/1.1
SSE on 127.0.0.1, read by the raw load client (``bench.loadclient``, this process):

- **outlast (durable)**: ``POST /agents/paced`` on ``bench.server`` (SQLite, FULL);
- **bare AG-UI app, no storage**: ``POST /bench/agents/paced`` on the same server
  (same agent, same encoding, same SSE response, nothing stored);
- **Microsoft Agent Framework AG-UI**: ``agent-framework-ag-ui``'s own FastAPI
  endpoint over a custom agent streaming text updates (``bench.peer_maf``), when an
  interpreter that has the package is found: this one, or
  ``$OUTLAST_BENCH_MAF_PYTHON``;
- **LangGraph dev server**: ``langgraph dev``'s own server (in-memory runtime) over a
  graph streaming stamped custom events (``bench.peer_langgraph``), asked for a
  stateless run (``POST /runs/stream``), when an interpreter that has
  ``langgraph-cli[inmem]`` is found: this one, or ``$OUTLAST_BENCH_LANGGRAPH_PYTHON``.

A peer missing is skipped with the reason. A frame is any ``data:`` frame (MAF sends no
ids); for LangGraph, a custom event (its run metadata, sent before the graph runs, is
not counted, so its first event is its first delta). The paced agent's runs also carry
tool calls and state deltas; the peers' only text, so their events are the cheaper kind.

    python -m bench.peers [--quick]
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.agents import paced_input
from bench.common import Server, fmt, parser, report
from bench.loadclient import Record, percentile, proc_cpu, raise_nofile, rounds

DATA = b"data: "


def peer_python(module: str, variable: str, package: str) -> tuple[str | None, str]:
    """An interpreter that can import ``module`` (this one, or ``$variable``), or why
    there is none."""
    env = os.environ.get(variable)
    candidates = [env] if env else []
    if importlib.util.find_spec(module) is not None:
        candidates.insert(0, sys.executable)
    for python in candidates:
        probe = subprocess.run([python, "-c", f"import {module}, uvicorn"],
                               capture_output=True, check=False)
        if probe.returncode == 0:
            return python, ""
    if env:
        return None, f"${variable} ({env}) cannot import {module}"
    return None, (f"{package} is not installed (pip install {package}, or point "
                  f"${variable} at an interpreter that has it)")


async def measure(server: Server, path: str, make_body: Any, events: int,
                  reps: int, marker: bytes = DATA,
                  frame_end: bytes = b"\n\n") -> dict[str, Any]:
    """One run at a time (``reps``), then 10 at once (``reps`` rounds)."""
    warm = Record(marker=marker, frame_end=frame_end)
    await rounds(server.url, path, make_body, 2, 1, warm)
    single = Record(marker=marker, frame_end=frame_end)
    rates = []
    cpu0 = proc_cpu(server.pid)
    for _ in range(reps):
        before = single.frames
        wall = await rounds(server.url, path, make_body, 1, 1, single)
        rates.append((single.frames - before) / wall)
    cpu = proc_cpu(server.pid) - cpu0
    ten = Record(marker=marker, frame_end=frame_end)
    slowest = []
    for _ in range(reps):
        ten.first.clear()
        await rounds(server.url, path, make_body, 10, 1, ten)
        slowest.append(max(ten.first))
    lat = sorted(single.latency)
    firsts = sorted(single.first)
    errors = single.errors + ten.errors + warm.errors
    return {
        "events_per_run": single.frames / reps, "events_per_s": statistics.median(rates),
        "cpu_ms_per_1000": cpu / max(single.frames, 1) * 1e6,
        "first_1_ms": percentile(firsts, 0.5) * 1e3,
        "first_10_slowest_ms": statistics.median(slowest) * 1e3,
        "first_10_slowest_range_ms": [min(slowest) * 1e3, max(slowest) * 1e3],
        "event_p50_ms": percentile(lat, 0.5) * 1e3, "event_p99_ms": percentile(lat, 0.99) * 1e3,
        "errors": errors[:5], "error_count": len(errors),
    }


async def main_async(quick: bool) -> dict[str, Any]:
    raise_nofile(1024)
    events = 1000
    reps = 3 if quick else 7
    results: dict[str, Any] = {}
    skipped: dict[str, str] = {}

    def paced(t: str) -> dict[str, Any]:
        return paced_input(f"t-{t}", f"r-{t}", events, rate=0)

    with tempfile.TemporaryDirectory(prefix="outlast-peers-") as tmp:
        with Server.bench(Path(tmp) / "outlast") as server:
            results["outlast (durable, SQLite FULL)"] = await measure(
                server, "/agents/paced", paced, events, reps)
            results["bare AG-UI app, no storage"] = await measure(
                server, "/bench/agents/paced", paced, events, reps)
        python, why = peer_python("agent_framework_ag_ui", "OUTLAST_BENCH_MAF_PYTHON",
                                  "agent-framework-ag-ui")
        if python is None:
            skipped["Microsoft Agent Framework AG-UI"] = why
        else:
            with Server([python, "-m", "bench.peer_maf", "--events", str(events)]) as maf:
                results["Microsoft Agent Framework AG-UI"] = await measure(
                    maf, "/", lambda t: {"threadId": f"t-{t}", "runId": f"r-{t}",
                                         "messages": [{"id": f"u-{t}", "role": "user",
                                                       "content": "go"}],
                                         "state": {}, "tools": [], "context": [],
                                         "forwardedProps": {}}, events, reps)
        python, why = peer_python("langgraph_api", "OUTLAST_BENCH_LANGGRAPH_PYTHON",
                                  "langgraph-cli[inmem]")
        if python is None:
            skipped["LangGraph dev server"] = why
        else:
            with Server([python, "-m", "bench.peer_langgraph", "--events",
                         str(events)]) as graph:
                results["LangGraph dev server"] = await measure(
                    graph, "/runs/stream",
                    lambda t: {"assistant_id": "bench", "input": {},
                               "stream_mode": ["custom"]},
                    events, reps, marker=b"event: custom", frame_end=b"\r\n\r\n")
    return {"peers": results, "skipped": skipped, "load": os.getloadavg()[0]}


def main() -> None:
    ns = parser(__doc__).parse_args()
    out = asyncio.run(main_async(ns.quick))
    rows: list[tuple[str, ...]] = [(
        "peer", "events/run", "one run ev/s (median)", "server CPU ms per 1,000 events",
        "first event, one run ms", "first event, slowest of 10 ms (min-max)",
        "event p50 / p99 ms (one run)", "errors")]
    for name, r in out["peers"].items():
        lo, hi = r["first_10_slowest_range_ms"]
        rows.append((name, fmt(r["events_per_run"]), fmt(r["events_per_s"]),
                     fmt(r["cpu_ms_per_1000"], digits=1), fmt(r["first_1_ms"], digits=1),
                     f"{fmt(r['first_10_slowest_ms'], digits=1)} ({lo:.1f}-{hi:.1f})",
                     f"{r['event_p50_ms']:.1f} / {r['event_p99_ms']:.1f}",
                     str(r["error_count"])))
    for name, why in out["skipped"].items():
        rows.append((name, "skipped", why, "", "", "", "", ""))
    print(f"load average: {out['load']:.2f}")
    report("peers: one run's events/s, CPU, first-event latency", out, rows, ns.json)


if __name__ == "__main__":
    main()
