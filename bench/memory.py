"""Resident memory of one ``outlast serve`` process holding 200 running, unwatched runs.

A real server process (SQLite store, defaults) is warmed up with one short demo run,
measured idle, then given demo runs whose first tool step sleeps for 100 s, so they
stay running; each client hangs up right after the response headers (G1: the run
goes on, nobody watches it). RSS is read from /proc once every run sits in its tool
step; reported as the growth over idle and per run. Measured at 100 and 200 runs,
so a fixed cost would show as a difference between the two per-run figures.

    python -m bench.memory [--quick]
"""

from __future__ import annotations

import asyncio
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from bench.common import Server, client, median, parser, report, rss_mb

KNOBS = {"steps": 2, "step_delay_ms": 100_000, "tokens_per_message": 24, "token_delay_ms": 0}


def demo_input(run_id: str, knobs: dict[str, Any]) -> dict[str, Any]:
    return {"threadId": f"thread-{run_id}", "runId": run_id, "protocolVersion": "1.0",
            "messages": [{"id": f"user-{run_id}", "role": "user", "content": "work"}],
            "state": {}, "tools": [], "context": [], "forwardedProps": {"demo": knobs}}


async def start_unwatched(c: Any, count: int) -> list[str]:
    """Admit ``count`` long demo runs; every client drops its stream after the headers."""
    ids = [f"mem-{uuid.uuid4().hex[:12]}" for _ in range(count)]

    async def one(run_id: str) -> None:
        async with c.stream("POST", "/agents/demo", json=demo_input(run_id, KNOBS)) as resp:
            if resp.status_code != 200:
                raise RuntimeError(f"admission answered {resp.status_code}")

    for i in range(0, count, 20):
        await asyncio.gather(*(one(r) for r in ids[i:i + 20]))
    return ids


async def settle(c: Any, ids: list[str], within: float = 60.0) -> int:
    """Wait until every run is running and its log stopped growing (in its tool step)."""
    deadline = time.monotonic() + within
    previous = -1
    while time.monotonic() < deadline:
        runs = [(await c.get(f"/runs/{r}")).json() for r in ids]
        ended = [r for r in runs if r["status"] not in ("queued", "running")]
        if ended:
            raise RuntimeError(f"{len(ended)} runs ended early, e.g. {ended[0]}")
        total = sum(int(r["lastSeq"]) for r in runs)
        if total == previous and all(r["status"] == "running" for r in runs):
            return total
        previous = total
        await asyncio.sleep(1.0)
    raise RuntimeError("runs did not settle")


def sample(pid: int, count: int = 5) -> float:
    values = []
    for _ in range(count):
        values.append(rss_mb(pid))
        time.sleep(0.3)
    return median(values)


async def measure(quick: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="outlast-bench-") as tmp, \
            Server.outlast(Path(tmp), "--drain-timeout", "1") as server:
        async with client(server.url) as c:
            # Warm-up: one short run to the end, so lazily loaded code is in memory.
            warm = demo_input("warm-up", {"steps": 1, "step_delay_ms": 10,
                                          "tokens_per_message": 24, "token_delay_ms": 0})
            async with c.stream("POST", "/agents/demo", json=warm) as resp:
                async for _ in resp.aiter_raw():
                    pass
            await asyncio.sleep(1.0)
            idle = sample(server.pid)
            out: dict[str, Any] = {"idle_mb": idle, "steps": []}
            ids: list[str] = []
            for target in (100, 200):
                ids += await start_unwatched(c, target - len(ids))
                events = await settle(c, ids)
                await asyncio.sleep(1.0)
                rss = sample(server.pid)
                out["steps"].append({"runs": target, "rss_mb": rss, "events": events,
                                     "mb_per_run": (rss - idle) / target})
    return out


def main() -> None:
    ns = parser(__doc__).parse_args()
    r = asyncio.run(measure(ns.quick))
    rows: list[tuple[str, ...]] = [("state", "RSS MB (median of 5)", "growth over idle MB",
                                    "MB per run", "events in logs")]
    rows.append(("idle (after one warm-up run)", f"{r['idle_mb']:.1f}", "", "", ""))
    for s in r["steps"]:
        rows.append((f"{s['runs']} running, unwatched", f"{s['rss_mb']:.1f}",
                     f"{s['rss_mb'] - r['idle_mb']:.1f}", f"{s['mb_per_run']:.3f}",
                     f"{s['events']:,}"))
    report("resident memory of unwatched running runs", r, rows, ns.json)


if __name__ == "__main__":
    main()
