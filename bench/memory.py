"""Resident memory of one ``outlast serve`` process holding running runs.

A real server process (SQLite store, defaults) is warmed up with one short demo run,
measured idle, then given demo runs whose first tool step sleeps for 100 s, so they
stay running. RSS is read from /proc once every run sits in its tool step. Measured at
100 and 200 runs, so a fixed cost would show as a difference between the two.

- **Unwatched:** each client hangs up right after the response headers (G1: the run
  goes on, nobody watches it); the input is one short message.
- **Resent history:** AG-UI front ends resend the whole conversation with every run.
  Each input carries a history of 60 messages (questions, tool calls, file contents:
  about 35 KB of JSON), once with the clients hanging up and once with each client
  watching its stream to the end of the measurement. Reported per run as the growth
  from 100 to 200 runs, and as a multiple of the history's JSON size.

    python -m bench.memory [--quick]
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from bench.agents import resent_history
from bench.common import Server, median, parser, report, rss_mb

KNOBS = {"steps": 2, "step_delay_ms": 100_000, "tokens_per_message": 24, "token_delay_ms": 0}
HISTORY = 60


def demo_input(run_id: str, knobs: dict[str, Any], history: int = 0) -> dict[str, Any]:
    return {"threadId": f"thread-{run_id}", "runId": run_id, "protocolVersion": "1.0",
            "messages": [*resent_history(run_id, history),
                         {"id": f"user-{run_id}", "role": "user", "content": "work"}],
            "state": {}, "tools": [], "context": [], "forwardedProps": {"demo": knobs}}


async def start_runs(c: httpx.AsyncClient, count: int, history: int, watch: bool,
                     clients: list[asyncio.Task[None]]) -> list[str]:
    """Admit ``count`` long demo runs, each from a task added to ``clients``: it drops its
    stream after the headers, or with ``watch`` keeps reading it until cancelled."""
    ids = [f"mem-{uuid.uuid4().hex[:12]}" for _ in range(count)]

    async def one(run_id: str, admitted: asyncio.Future[None]) -> None:
        try:
            async with c.stream("POST", "/agents/demo",
                                json=demo_input(run_id, KNOBS, history)) as resp:
                if resp.status_code != 200:
                    raise RuntimeError(f"admission answered {resp.status_code}")
                admitted.set_result(None)
                if watch:
                    async for _ in resp.aiter_raw():
                        pass
        except Exception as exc:
            if admitted.done():
                raise
            admitted.set_exception(exc)

    loop = asyncio.get_running_loop()
    for i in range(0, count, 20):
        admissions = [loop.create_future() for _ in ids[i:i + 20]]
        clients += [asyncio.create_task(one(r, a))
                    for r, a in zip(ids[i:i + 20], admissions, strict=True)]
        await asyncio.gather(*admissions)
    return ids


async def settle(c: httpx.AsyncClient, ids: list[str], within: float = 60.0) -> int:
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


async def measure(history: int, watched: bool) -> dict[str, Any]:
    """Idle RSS, then RSS with 100 and 200 such runs running."""
    with tempfile.TemporaryDirectory(prefix="outlast-bench-") as tmp, \
            Server.outlast(Path(tmp), "--drain-timeout", "1") as server:
        limits = httpx.Limits(max_connections=1000, max_keepalive_connections=100)
        async with httpx.AsyncClient(base_url=server.url, timeout=httpx.Timeout(120.0),
                                     limits=limits) as c:
            # Warm-up: one short run to the end, so lazily loaded code is in memory.
            warm = demo_input("warm-up", {"steps": 1, "step_delay_ms": 10,
                                          "tokens_per_message": 24, "token_delay_ms": 0})
            async with c.stream("POST", "/agents/demo", json=warm) as resp:
                async for _ in resp.aiter_raw():
                    pass
            await asyncio.sleep(1.0)
            idle = sample(server.pid)
            out: dict[str, Any] = {"idle_mb": idle, "steps": [], "watched": watched,
                                   "history_bytes": len(json.dumps(resent_history("x" * 16,
                                                                                  history)))}
            ids: list[str] = []
            clients: list[asyncio.Task[None]] = []
            for target in (100, 200):
                ids += await start_runs(c, target - len(ids), history, watched, clients)
                events = await settle(c, ids)
                await asyncio.sleep(1.0)
                rss = sample(server.pid)
                out["steps"].append({"runs": target, "rss_mb": rss, "events": events,
                                     "mb_per_run": (rss - idle) / target})
            for task in clients:
                task.cancel()
            await asyncio.gather(*clients, return_exceptions=True)
    return out


def main() -> None:
    ns = parser(__doc__).parse_args()
    plain = asyncio.run(measure(0, watched=False))
    resent = [asyncio.run(measure(HISTORY, watched)) for watched in (False, True)]
    rows: list[tuple[str, ...]] = [("state", "RSS MB (median of 5)", "growth over idle MB",
                                    "MB per run", "events in logs")]
    rows.append(("idle (after one warm-up run)", f"{plain['idle_mb']:.1f}", "", "", ""))
    for s in plain["steps"]:
        rows.append((f"{s['runs']} running, unwatched", f"{s['rss_mb']:.1f}",
                     f"{s['rss_mb'] - plain['idle_mb']:.1f}", f"{s['mb_per_run']:.3f}",
                     f"{s['events']:,}"))
    report("resident memory of unwatched running runs", plain, rows, None)
    history_rows: list[tuple[str, ...]] = [(
        "runs resending a history", "history JSON KB", "RSS MB at 100 / 200 runs",
        "KB per run (100 → 200)", "x the history's size")]
    for r in resent:
        low, high = r["steps"]
        per_run = (high["rss_mb"] - low["rss_mb"]) * 1024 / (high["runs"] - low["runs"])
        r["kb_per_run"] = per_run
        history_rows.append((
            "watched to the end" if r["watched"] else "unwatched",
            f"{r['history_bytes'] / 1024:.1f}", f"{low['rss_mb']:.1f} / {high['rss_mb']:.1f}",
            f"{per_run:.0f}", f"{per_run * 1024 / r['history_bytes']:.1f}"))
    report("resident memory of running runs whose clients resend a history",
           {"plain": plain, "resent": resent}, history_rows, ns.json)


if __name__ == "__main__":
    main()
