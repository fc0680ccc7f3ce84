"""PostgreSQL store against the SQLite store, and the cost of crossing processes.

Self-contained: starts a throwaway PostgreSQL cluster (``tests/support/postgres.py``,
fsync and synchronous commit ON so it is as durable as SQLite's ``synchronous=FULL``),
real ``outlast serve`` processes, and reads their SSE streams over loopback.

1. Durable streaming throughput, one run to one client: events/s, PostgreSQL vs SQLite.
2. Concurrent runs per process: C runs at once on one process, each followed by a
   client; aggregate events/s and wall time, PostgreSQL vs SQLite.
3. Cross-process live delivery: a run executes on A (B is started with
   ``--max-runs 0`` so it never executes); a client of A and a client of B follow it
   live. Each event carries the wall time it was emitted; A's own client receives it
   right after A's commit (in-process publish), B's client after NOTIFY → B → re-read of
   the log. Reported: emit → client of A, emit → client of B, and B - A per event
   (median, p99).

    python bench/bench_postgres.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from bench.common import Server, median  # noqa: E402
from outlast.agent import Agent, Capabilities, RunContext  # noqa: E402

# -- the load --------------------------------------------------------------------


class FastAgent(Agent):
    """Streams text messages token by token, as fast as it can or at a set pace.

    ``forwardedProps.fast``: ``events`` (about how many to emit), ``tokens`` (content
    events per message), ``pace_ms`` (sleep between events; 0 yields only),
    ``lead_ms`` (wait before the first event, so followers are attached live),
    ``stamp`` (carry the emit time, for latency).
    """

    capabilities = Capabilities(description="Benchmark load for the PostgreSQL bench.")

    async def run(self, ctx: RunContext) -> None:
        raw = ctx.forwarded_props.get("fast") if isinstance(ctx.forwarded_props, dict) else None
        k: dict[str, Any] = raw if isinstance(raw, dict) else {}
        events, tokens = int(k.get("events", 1000)), int(k.get("tokens", 20))
        pace, stamp = float(k.get("pace_ms", 0)) / 1000, bool(k.get("stamp", False))
        if k.get("lead_ms"):
            await asyncio.sleep(float(k["lead_ms"]) / 1000)
        n = 0
        while n < events:
            mid = ctx.new_id("msg")
            await ctx.emit({"type": "TEXT_MESSAGE_START", "messageId": mid,
                            "role": "assistant"})
            for i in range(tokens):
                delta = f" {time.time():.6f}" if stamp else f" token{i}"
                await ctx.emit({"type": "TEXT_MESSAGE_CONTENT", "messageId": mid,
                                "delta": delta})
                n += 1
                await asyncio.sleep(pace)
            await ctx.emit({"type": "TEXT_MESSAGE_END", "messageId": mid})
            n += 2


def factory(settings: Any = None) -> FastAgent:
    """``--agent fast=bench.bench_postgres:factory``."""
    return FastAgent()


def fast_input(events: int, *, tokens: int = 20, pace_ms: float = 0, lead_ms: int = 0,
               stamp: bool = False) -> dict[str, Any]:
    tag = uuid.uuid4().hex[:12]
    return {"threadId": f"t-{tag}", "runId": f"r-{tag}", "protocolVersion": "1.0",
            "messages": [{"id": f"u-{tag}", "role": "user", "content": "go"}],
            "state": {}, "tools": [], "context": [],
            "forwardedProps": {"fast": {"events": events, "tokens": tokens,
                                        "pace_ms": pace_ms, "lead_ms": lead_ms,
                                        "stamp": stamp}}}


# -- servers and clients --------------------------------------------------------------


def client(url: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=url, timeout=httpx.Timeout(300.0),
                             limits=httpx.Limits(max_connections=500))


async def count_frames(c: httpx.AsyncClient, method: str, url: str, *,
                       from_first: bool = False, **kwargs: Any) -> tuple[int, float]:
    """Data frames of one SSE response and the seconds it took (frames not parsed);
    ``from_first`` times from the first stored event instead of from the request."""
    frames = 0
    tail = b""
    start = time.perf_counter()
    async with c.stream(method, url, **kwargs) as resp:
        if resp.status_code != 200:
            raise RuntimeError(f"{url}: {resp.status_code} {(await resp.aread())[:200]!r}")
        waiting = from_first
        async for chunk in resp.aiter_raw():
            if waiting and b"id: " in chunk:
                start, waiting = time.perf_counter(), False
            data = tail + chunk
            frames += data.count(b"\ndata: ") - tail.count(b"\ndata: ")
            tail = data[-8:]
    return frames, time.perf_counter() - start


async def stamped_arrivals(c: httpx.AsyncClient, method: str, url: str,
                           **kwargs: Any) -> dict[int, tuple[float, float]]:
    """seq -> (emitted at, received at) for every stamped content event of a stream."""
    out: dict[int, tuple[float, float]] = {}
    async with c.stream(method, url, **kwargs) as resp:
        buf = ""
        async for chunk in resp.aiter_text():
            now = time.time()
            buf += chunk
            while "\n\n" in buf:
                block, buf = buf.split("\n\n", 1)
                seq = None
                for line in block.split("\n"):
                    if line.startswith("id: "):
                        seq = int(line[4:])
                    elif line.startswith("data: ") and seq is not None:
                        event = json.loads(line[6:])
                        if event.get("type") == "TEXT_MESSAGE_CONTENT":
                            out[seq] = (float(event["delta"]), now)
    return out


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]


# -- measurements ----------------------------------------------------------------------


async def throughput(url: str, events: int, reps: int) -> list[float]:
    async with client(url) as c:
        await count_frames(c, "POST", "/agents/fast", json=fast_input(min(events, 1000)))
        rates = []
        for _ in range(reps):
            frames, secs = await count_frames(c, "POST", "/agents/fast",
                                              json=fast_input(events))
            rates.append(frames / secs)
    return rates


async def concurrent(url: str, runs: int, events: int) -> tuple[float, float]:
    """C runs at once on one process, each followed by its own client: (events/s, s)."""
    async with client(url) as c:
        start = time.perf_counter()
        results = await asyncio.gather(*(
            count_frames(c, "POST", "/agents/fast", json=fast_input(events))
            for _ in range(runs)))
        wall = time.perf_counter() - start
    return sum(f for f, _ in results) / wall, wall


async def follow_from_b(a_url: str, b_url: str, events: int) -> tuple[float, float]:
    """One fast run on A: events/s seen by A's own client and by a client of B."""
    body = fast_input(events, lead_ms=300)
    run_id = body["runId"]
    async with client(a_url) as ca, client(b_url) as cb:
        on_a = asyncio.create_task(count_frames(ca, "POST", "/agents/fast", json=body,
                                                from_first=True))
        for _ in range(1000):
            if (await cb.get(f"/runs/{run_id}")).status_code == 200:
                break
            await asyncio.sleep(0.01)
        frames_b, secs_b = await count_frames(cb, "GET", f"/runs/{run_id}/events",
                                              from_first=True)
        frames_a, secs_a = await on_a
    return frames_a / secs_a, frames_b / secs_b


async def cross_process(a_url: str, b_url: str, events: int,
                        pace_ms: float) -> dict[str, list[float]]:
    body = fast_input(events, tokens=50, pace_ms=pace_ms, lead_ms=800, stamp=True)
    run_id = body["runId"]
    async with client(a_url) as ca, client(b_url) as cb:
        on_a = asyncio.create_task(stamped_arrivals(ca, "POST", "/agents/fast", json=body))
        for _ in range(1000):  # B can follow the run once A admitted it
            if (await cb.get(f"/runs/{run_id}")).status_code == 200:
                break
            await asyncio.sleep(0.01)
        on_b = await stamped_arrivals(cb, "GET", f"/runs/{run_id}/events")
        seen_a = await on_a
    common = sorted(set(seen_a) & set(on_b))
    return {
        "a": [(seen_a[s][1] - seen_a[s][0]) * 1000 for s in common],
        "b": [(on_b[s][1] - on_b[s][0]) * 1000 for s in common],
        "b_minus_a": [(on_b[s][1] - seen_a[s][1]) * 1000 for s in common],
    }


# -- the run ------------------------------------------------------------------------


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--quick", action="store_true", help="short smoke run")
    opts = ap.parse_args()
    from tests.support.postgres import PostgresCluster

    events = 3000 if opts.quick else 20000
    reps = 2 if opts.quick else 5
    conc_runs = [10] if opts.quick else [10, 50]
    conc_events = 500 if opts.quick else 4000
    conc_reps = 1 if opts.quick else 3
    latency_events = 200 if opts.quick else 1000

    print(f"machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}")
    cluster = PostgresCluster.start_new(durable=True)
    servers: list[Server] = []
    try:
        with tempfile.TemporaryDirectory(prefix="outlast-bench-pg-") as tmp:
            root = Path(tmp)

            def serve(name: str, *args: str) -> Server:
                s = Server.outlast(root / name, "--agent", "fast=bench.bench_postgres:factory",
                                   *args).start()
                servers.append(s)
                return s

            sqlite = serve("sqlite")
            pg = serve("pg", "--store", cluster.fresh_database("bench"))
            results: dict[str, Any] = {}

            # 1. one run, one client: alternate backends rep by rep.
            rates: dict[str, list[float]] = {"sqlite": [], "pg": []}
            for rep in range(reps):
                order = [("sqlite", sqlite), ("pg", pg)]
                if rep % 2:
                    order.reverse()
                for name, server in order:
                    rates[name] += asyncio.run(throughput(server.url, events, 1))
            results["throughput"] = rates

            # 2. concurrent runs on one process, alternating backends.
            for c in conc_runs:
                for rep in range(conc_reps):
                    order = [("sqlite", sqlite), ("pg", pg)]
                    if rep % 2:
                        order.reverse()
                    for name, server in order:
                        results.setdefault(f"concurrent_{c}_{name}", []).append(
                            asyncio.run(concurrent(server.url, c, conc_events)))

            # 3. cross-process live delivery: A executes, B only serves (a process
            # executes at least one run at once; A claims the runs it admits itself).
            url = cluster.fresh_database("latency")
            a = serve("a", "--store", url)
            b = serve("b", "--store", url, "--max-runs", "1")
            lat = asyncio.run(cross_process(a.url, b.url, latency_events, pace_ms=10))
            results["latency"] = lat
            results["follow"] = [asyncio.run(follow_from_b(a.url, b.url, events))
                                 for _ in range(reps)]

            print_report(results, events, reps, conc_runs, conc_events, latency_events)
    finally:
        for s in servers:
            s.stop()
        cluster.stop()


def print_report(r: dict[str, Any], events: int, reps: int, conc_runs: list[int],
                 conc_events: int, latency_events: int) -> None:
    sq, pg = r["throughput"]["sqlite"], r["throughput"]["pg"]
    print(f"\n== durable streaming throughput: one run ({events:,} events) to one client, "
          f"{reps} reps ==")
    print(f"  SQLite (synchronous=FULL)     median {median(sq):>9,.0f} ev/s  "
          f"(min {min(sq):,.0f}, max {max(sq):,.0f})")
    print(f"  PostgreSQL (fsync, sync commit) median {median(pg):>7,.0f} ev/s  "
          f"(min {min(pg):,.0f}, max {max(pg):,.0f})")
    print(f"  ratio PostgreSQL / SQLite: {median(pg) / median(sq):.2f}")
    print(f"\n== concurrent runs on one process ({conc_events:,} events each, "
          "each followed by a client; aggregate ev/s, median of reps) ==")
    for c in conc_runs:
        sq_rate = median([x for x, _ in r[f"concurrent_{c}_sqlite"]])
        pg_rate = median([x for x, _ in r[f"concurrent_{c}_pg"]])
        sq_wall = median([w for _, w in r[f"concurrent_{c}_sqlite"]])
        pg_wall = median([w for _, w in r[f"concurrent_{c}_pg"]])
        print(f"  {c:>3} runs: SQLite {sq_rate:>9,.0f} ev/s ({sq_wall:.2f} s)   "
              f"PostgreSQL {pg_rate:>9,.0f} ev/s ({pg_wall:.2f} s)   "
              f"ratio {pg_rate / sq_rate:.2f}")
    fa = [a for a, _ in r["follow"]]
    fb = [b for _, b in r["follow"]]
    print(f"\n== one fast run on A ({events:,} events), followed by a client of A and of B ==")
    print(f"  client of A median {median(fa):>9,.0f} ev/s   client of B median "
          f"{median(fb):>9,.0f} ev/s   ratio B / A {median(fb) / median(fa):.2f}")
    lat = r["latency"]
    print(f"\n== cross-process live delivery ({len(lat['b'])} events, one every ~10 ms; "
          "run on A, clients on A and B) ==")
    for key, label in (("a", "emit on A -> client of A"), ("b", "emit on A -> client of B"),
                       ("b_minus_a", "client of A -> client of B (cross-process cost)")):
        print(f"  {label:<48} median {median(lat[key]):6.2f} ms   p99 {p99(lat[key]):6.2f} ms")


if __name__ == "__main__":
    main()
