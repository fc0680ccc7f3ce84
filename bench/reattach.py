"""Time to the first replayed event on reattach to a finished 20,000-event run.

A client that comes back sends ``Last-Event-ID``; we time from the request's start
to the first frame carrying an ``id`` (after the synthesized ``RUN_STARTED`` and the
re-opened constructs), then hang up. The resume points sit inside an open text
message, so every reattach also folds from the last boundary to re-open it.
Floor: the same request against the pre-encoded frames in memory (same server, same
HTTP stack, no store). Target: median ≤ 5 ms.

Then inside one 100,000-event text message (``bench.agents.LongMessageAgent``), on a
real ``outlast serve`` over SQLite and over PostgreSQL: the run is written once per
backend, then reattached at seq 1,000 / 50,000 / 99,999 (inside the open message),
after the message's end and after the run's end. Target: median first event ≤ 5 ms at
every position. Then 100 reattaches at 50,000 at once, over warm keep-alive
connections: the time until every one of them has its first stored event (the target:
within 2 x one reattach's median x 100 / cores), and, separately, until every one has
read the run to its end.

Then a reattach to runs whose client resent a long history with its request, as AG-UI
front ends do: 0, 60, 600 and 3,000 messages (an input of 0.2 KB to 1.8 MB, past the
default limits, as an operator whose agents hold long sessions sets them), on SQLite
and PostgreSQL. Target: median first event ≤ 1.2 x that of the run with no history.

    python -m bench.reattach [--quick] [--only short|long|history] [--plot-dir DIR]
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

from bench.agents import bench_input, long_input, paced_input
from bench.common import (
    Server,
    client,
    finished_run,
    median,
    median_p10_p90,
    p10_p90,
    parser,
    postgres_cluster,
    read_stream,
    report,
)
from bench.plot import line_chart

TARGET_MS = 5.0
HISTORIES = (0, 60, 600, 3000)  # resent messages (bench.agents.resent_history)
HISTORY_TARGET = 1.2
LONG_EVENTS = 100_000
CONCURRENT = 100


async def resume_points(c: Any, run_id: str, last: int) -> dict[str, int]:
    """Seqs of content events inside a text message, near the middle and near the end."""
    resp = await c.get(f"/runs/{run_id}/events", params={"follow": "false"})
    content = []
    for block in resp.text.split("\n\n"):
        if block.startswith("id: ") and '"TEXT_MESSAGE_CONTENT"' in block:
            seq, _, data = block.partition("\ndata: ")
            if json.loads(data)["type"] == "TEXT_MESSAGE_CONTENT":
                content.append(int(seq[4:]))
    middle = min(content, key=lambda s: abs(s - last // 2))
    end = min(content, key=lambda s: abs(s - (last - 20)))
    return {"middle": middle, "end": end}


async def time_first(c: Any, method: str, path: str, after: int, **kwargs: Any) -> float:
    stats = await read_stream(c, method, path, until_first_id=True,
                              headers={"Last-Event-ID": str(after)}, **kwargs)
    if stats.status != 200 or stats.first_id is None:
        raise RuntimeError(f"{path}: status {stats.status}, no event")
    return stats.first_id * 1000


async def measure(url: str, events: int, samples: int) -> dict[str, Any]:
    results: dict[str, Any] = {}
    async with client(url) as c:
        run_id, last = await finished_run(c, events)
        points = await resume_points(c, run_id, last)
        body = bench_input(f"thread-{run_id}", run_id, events)
        for where, after in points.items():
            cases = {
                "GET /runs/{id}/events": ("GET", f"/runs/{run_id}/events", {}),
                "POST /agents/bench (retry)": ("POST", "/agents/bench", {"json": body}),
                "floor: pre-encoded": ("GET", f"/bench/runs/{run_id}/events?after={after}", {}),
            }
            for name, (method, path, kwargs) in cases.items():
                for _ in range(5):  # warm-up
                    await time_first(c, method, path, after, **kwargs)
                times = [await time_first(c, method, path, after, **kwargs)
                         for _ in range(samples)]
                results[f"{name} @ {where} (Last-Event-ID {after})"] = {
                    "after": after, "last": last, "ms": times}
    return results


async def main_async(quick: bool) -> tuple[dict[str, Any], list[tuple[str, ...]]]:
    samples = 30 if quick else 100
    with tempfile.TemporaryDirectory(prefix="outlast-bench-") as tmp, \
            Server.bench(Path(tmp)) as server:
        results = await measure(server.url, 20000, samples)
    rows: list[tuple[str, ...]] = [("reattach", "samples", "median ms", "p10-p90 ms",
                                    f"≤ {TARGET_MS:g} ms")]
    for name, r in results.items():
        ms = sorted(r["ms"])
        r["median"] = median(ms)
        ok = "" if name.startswith("floor") else ("yes" if r["median"] <= TARGET_MS else "NO")
        rows.append((name, str(len(ms)), f"{r['median']:.2f}", p10_p90(ms), ok))
    return results, rows


# -- inside one 100,000-event text message ---------------------------------------------


async def time_to_close(c: Any, path: str, after: int) -> float:
    """A reattach after a final run's end gets the final event again (without an id, as
    nothing follows it) and the stream closes: timed to the close."""
    stats = await read_stream(c, "GET", path, headers={"Last-Event-ID": str(after)})
    if stats.status != 200 or stats.frames < 2:
        raise RuntimeError(f"{path}: status {stats.status}, {stats.frames} frames")
    return stats.elapsed * 1000


async def check_reopens(c: httpx.AsyncClient, path: str, after: int, inside: bool) -> None:
    """The stream re-opens the message before its first stored event iff ``after`` is
    inside it (spec §4), and that event is ``after + 1``."""
    head = b""
    async with c.stream("GET", path, headers={"Last-Event-ID": str(after)}) as resp:
        async for chunk in resp.aiter_raw():
            head += chunk
            if b"\nid: " in head and head.rstrip(b"\n").count(b"\n\n") >= 3:
                break
    before, _, rest = head.partition(b"\nid: ")
    if (b'"TEXT_MESSAGE_START"' in before) != inside or \
            not rest.startswith(str(after + 1).encode()):
        raise RuntimeError(f"reattach at {after}: unexpected stream head {head[:300]!r}")


async def write_long(c: httpx.AsyncClient, events: int) -> tuple[str, int, float]:
    """The long-message run, written once: ``(run_id, last seq, seconds)``."""
    run_id = f"long-{os.getpid()}-{time.monotonic_ns()}"
    start = time.perf_counter()
    stats = await read_stream(c, "POST", "/agents/long",
                              json=long_input(f"thread-{run_id}", run_id, events))
    seconds = time.perf_counter() - start
    run = (await c.get(f"/runs/{run_id}")).json()
    if stats.status != 200 or run["status"] != "succeeded":
        raise RuntimeError(f"the long run: {stats.status} {run['status']}")
    return run_id, int(run["lastSeq"]), seconds


async def concurrent(c: httpx.AsyncClient, path: str, after: int, *,
                     to_end: bool) -> tuple[float, list[float]]:
    """``CONCURRENT`` reattaches at once: (ms until the last one got its first stored
    event, or read to the end; each one's ms)."""
    start = time.perf_counter()

    async def one() -> float:
        stats = await read_stream(c, "GET", path, until_first_id=not to_end,
                                  headers={"Last-Event-ID": str(after)})
        if stats.status != 200 or stats.first_id is None:
            raise RuntimeError(f"{path}: status {stats.status}")
        return (stats.elapsed if to_end else stats.first_id) * 1000

    each = await asyncio.gather(*(one() for _ in range(CONCURRENT)))
    return (time.perf_counter() - start) * 1000, list(each)


async def measure_long(url: str, events: int, samples: int, rounds: int) -> dict[str, Any]:
    limits = httpx.Limits(max_connections=CONCURRENT * 2,
                          max_keepalive_connections=CONCURRENT * 2)
    async with httpx.AsyncClient(base_url=url, timeout=httpx.Timeout(600.0),
                                 limits=limits) as c:
        run_id, last, seconds = await write_long(c, events)
        path = f"/runs/{run_id}/events"
        # RUN_STARTED is seq 1, the message runs from 2 to last - 1, RUN_FINISHED is last.
        middle = events // 2
        points = {f"{events // 100:,}": events // 100, f"{middle:,}": middle,
                  f"{events - 1:,}": events - 1,
                  "after the message's end": last - 1, "after the run's end": last}
        out: dict[str, Any] = {"run_id": run_id, "last": last, "write_s": seconds,
                               "points": {}}
        for where, after in points.items():
            if after < last:
                await check_reopens(c, path, after, inside=after < last - 1)
            timer = time_to_close if after >= last else \
                (lambda c, p, a: time_first(c, "GET", p, a))
            for _ in range(5):  # warm-up
                await timer(c, path, after)
            times = [await timer(c, path, after) for _ in range(samples)]
            out["points"][where] = {"after": after, "ms": times, "median": median(times)}
        # Warm CONCURRENT keep-alive connections, so the burst measures reattaching,
        # not TCP connects.
        await asyncio.gather(*(c.get("/healthz") for _ in range(CONCURRENT)))
        single = out["points"][f"{middle:,}"]["median"]
        bursts = [await concurrent(c, path, middle, to_end=False) for _ in range(rounds)]
        out["burst_first"] = {"wall_ms": [w for w, _ in bursts],
                              "each_ms": [x for _, e in bursts for x in e]}
        wall, each = await concurrent(c, path, middle, to_end=True)
        out["burst_end"] = {"wall_ms": wall, "each_ms": each, "events": last - middle}
        out["middle"] = middle
        out["target_ms"] = 2 * single * CONCURRENT / (os.cpu_count() or 1)
    return out


def serve_long(tmp: Path, name: str, *args: str) -> Server:
    return Server.outlast(tmp / name, "--agent", "long=bench.agents:long_factory",
                          "--drain-timeout", "1", "--log-level", "warning", *args)


async def on_both_backends(serve: Callable[..., Server], name: str,
                           measure: Callable[[str], Awaitable[dict[str, Any]]]
                           ) -> dict[str, Any]:
    """``measure(url)`` against ``serve(dir, name, *args)`` on SQLite, then on a database
    of a throwaway PostgreSQL cluster (or the reason it was skipped)."""
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="outlast-bench-") as tmp:
        with serve(Path(tmp), "sqlite") as server:
            results["SQLite"] = await measure(server.url)
        with postgres_cluster() as (cluster, skipped):
            if cluster is None:
                results["PostgreSQL"] = {"skipped": skipped}
            else:
                with serve(Path(tmp), "pg", "--store", cluster.fresh_database(name)) as server:
                    results["PostgreSQL"] = await measure(server.url)
    return results


async def long_backends(quick: bool, events: int) -> dict[str, Any]:
    samples, rounds = (20, 2) if quick else (100, 5)
    return await on_both_backends(serve_long, "reattach",
                                  lambda url: measure_long(url, events, samples, rounds))


def long_rows(results: dict[str, Any]) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = [("backend", "reattach (Last-Event-ID)", "samples",
                                    "median ms", "p10-p90 ms", "target", "met")]
    for backend, r in results.items():
        if "skipped" in r:
            rows.append((backend, "skipped", r["skipped"], "", "", "", ""))
            continue
        for where, p in r["points"].items():
            label = "inside the message" if where[0].isdigit() else where
            rows.append((backend, f"{label} ({p['after']:,})", str(len(p["ms"])),
                         f"{p['median']:.2f}", p10_p90(p["ms"]), f"≤ {TARGET_MS:g} ms",
                         "yes" if p["median"] <= TARGET_MS else "NO"))
        bf, be = r["burst_first"], r["burst_end"]
        wall = median(bf["wall_ms"])
        at = f"{r['middle']:,}"
        rows.append((backend, f"{CONCURRENT} at once ({at}): all have their first event",
                     f"{len(bf['wall_ms'])} bursts", f"{wall:.1f}",
                     f"each: median {median(bf['each_ms']):.1f}, "
                     f"max {max(bf['each_ms']):.1f}",
                     f"≤ {r['target_ms']:.0f} ms", "yes" if wall <= r["target_ms"] else "NO"))
        rows.append((backend, f"{CONCURRENT} at once ({at}): all read to the end "
                              f"({be['events']:,} events each)", "1 burst",
                     f"{be['wall_ms']:,.0f}",
                     f"each: median {median(be['each_ms']):,.0f}, "
                     f"max {max(be['each_ms']):,.0f}", "(none)", ""))
    return rows


def plot_long(results: dict[str, Any], path: Path) -> None:
    series = {backend: [(p["after"], p["median"]) for p in r["points"].values()
                        if p["after"] < r["last"]]
              for backend, r in results.items() if "points" in r}
    line_chart(path, "Reattach inside one 100,000-event text message",
               "Last-Event-ID (seq)", "median ms to first stored event", series,
               hline=(TARGET_MS, f"target {TARGET_MS:g} ms"))


# -- runs whose client resent its history ----------------------------------------------


async def measure_history(url: str, samples: int) -> dict[str, Any]:
    """Reattach in the middle of a finished 200-event run, for each history length,
    the lengths taken in turn so that drift hits them alike."""
    runs: dict[int, dict[str, Any]] = {}
    async with client(url) as c:
        for count in HISTORIES:
            run_id = f"history-{count}-{os.getpid()}-{time.monotonic_ns()}"
            body = paced_input(f"thread-{run_id}", run_id, 200, rate=0, history=count)
            stats = await read_stream(c, "POST", "/agents/paced", json=body)
            run = (await c.get(f"/runs/{run_id}")).json()
            if stats.status != 200 or run["status"] != "succeeded":
                raise RuntimeError(f"history {count}: {stats.status} {run}")
            runs[count] = {"input_bytes": len(json.dumps(body)), "ms": [],
                           "path": f"/runs/{run_id}/events", "after": run["lastSeq"] // 2}
        for turn in range(samples + 5):
            for r in runs.values():
                ms = await time_first(c, "GET", r["path"], r["after"])
                if turn >= 5:  # warm-up
                    r["ms"].append(ms)
    return {str(count): r for count, r in runs.items()}


def serve_paced(tmp: Path, name: str, *args: str) -> Server:
    # The longest history is past the default limits (1 MiB, 1,000 messages): as set by
    # an operator whose agents hold long sessions.
    return Server.outlast(tmp / name, "--agent", "paced=bench.agents:paced_factory",
                          "--max-body-bytes", str(4 << 20), "--max-messages", "4000",
                          "--log-level", "warning", *args)


async def history_backends(quick: bool) -> dict[str, Any]:
    samples = 30 if quick else 200
    return await on_both_backends(serve_paced, "history",
                                  lambda url: measure_history(url, samples))


def history_rows(results: dict[str, Any]) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = [
        ("backend", "resent messages", "input", "median ms (p10-p90)", "x no history",
         f"≤ {HISTORY_TARGET:g}x")]
    for backend, r in results.items():
        if "skipped" in r:
            rows.append((backend, r["skipped"], "", "", "", ""))
            continue
        base = median(r["0"]["ms"])
        for count, h in r.items():
            ratio = median(h["ms"]) / base
            rows.append((backend, f"{int(count):,}", f"{h['input_bytes'] / 1000:,.1f} KB",
                         median_p10_p90(h["ms"]), f"{ratio:.2f}x",
                         "" if count == "0" else ("yes" if ratio <= HISTORY_TARGET else "NO")))
    return rows


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--only", choices=["short", "long", "history"], help="run one part")
    p.add_argument("--plot-dir", type=Path, help="write the long-message chart here (SVG)")
    p.add_argument("--long-events", type=int, default=LONG_EVENTS,
                   help="events in the long message (a smaller one for a smoke run)")
    ns = p.parse_args()
    results: dict[str, Any] = {}
    tables: list[dict[str, Any]] = []
    if ns.only in (None, "short"):
        results, rows = asyncio.run(main_async(ns.quick))
        report("time to first replayed event on reattach", results, rows, None)
        tables.append({"name": "time to first replayed event on reattach", "rows": rows})
    if ns.only in (None, "long"):
        long = asyncio.run(long_backends(ns.quick, ns.long_events))
        for r in long.values():
            if "write_s" in r:
                print(f"  (wrote {r['last']:,} events in {r['write_s']:.1f} s)")
        lrows = long_rows(long)
        report("reattach inside one 100,000-event text message", long, lrows, None)
        if ns.plot_dir:
            plot_long(long, ns.plot_dir / "reattach-long-message.svg")
        results["long_message"] = long
        tables.append({"name": "reattach inside one 100,000-event text message",
                       "rows": lrows})
    if ns.only in (None, "history"):
        history = asyncio.run(history_backends(ns.quick))
        hrows = history_rows(history)
        report("reattach to a run with a resent history", history, hrows, None)
        results["history"] = history
        tables.append({"name": "reattach to a run with a resent history", "rows": hrows})
    if ns.json:
        first, *more = tables
        ns.json.write_text(json.dumps({"name": first["name"], "results": results,
                                       "rows": first["rows"], "tables": more}, indent=2))


if __name__ == "__main__":
    main()
