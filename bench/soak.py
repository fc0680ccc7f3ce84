"""Resident memory of one ``outlast serve`` process over 10,000 finished runs (G10).

One real server process (SQLite, then PostgreSQL) is given demo runs of every kind a
client produces, 32 in flight at a time, in rounds of 1,000; after each round, every
run of the round is final, and the process's RSS is read from ``/proc`` (median of
three reads), with its open file descriptors and ``GET /metrics``. The kinds, in
turn:

- ``watched``: the client reads the stream to the end.
- ``abandoned``: the client leaves after the first frame; the run goes on (G1).
- ``cancelled`` / ``cancelled_wait``: a slow run, cancelled after its first frame by
  ``POST /runs/{id}/cancel`` (then polled) and by ``?wait=true``.
- ``failed``: the demo's tool fails at step 1 (``fail_at``).
- ``resumed_json`` / ``resumed_sse``: the run ends ``interrupted`` for an approval;
  ``POST /threads/{id}/resume`` answers it (JSON, then polled; or its SSE stream,
  read to the end).
- ``retried``: the client leaves after the first frame and sends the same POST
  again, which attaches to the run (G3) and reads it to the end.
- ``reattached``: the client leaves after its first stored event, then reads
  ``GET /runs/{id}/events`` with ``Last-Event-ID`` to the end.
- ``deleted``: read to the end, then ``DELETE /threads/{id}``.

Every run's outcome is checked (status, replay header, the thread gone). Target:
after the first 1,000 runs, RSS grows by at most 5 MB over the remaining 9,000.

    python -m bench.soak [--quick] [--runs N] [--concurrency C] [--only sqlite|postgres]
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
import time
import uuid
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from bench.common import Server, machine, median, parser, postgres_cluster, report, rss_mb
from bench.plot import line_chart

TARGET_MB = 5.0
ROUND = 1000
FAST = {"steps": 2, "step_delay_ms": 5, "tokens_per_message": 20, "token_delay_ms": 0}
SLOW = {**FAST, "step_delay_ms": 30_000}  # still in its first tool step when cancelled
KINDS = ["watched", "abandoned", "cancelled", "cancelled_wait", "failed", "resumed_json",
         "resumed_sse", "retried", "reattached", "deleted"]
FINAL = ("succeeded", "failed", "cancelled", "interrupted")


class Unexpected(RuntimeError):
    """A run ended otherwise than its kind says it must."""


def demo_input(knobs: dict[str, Any]) -> dict[str, Any]:
    tag = uuid.uuid4().hex[:16]
    return {"threadId": f"soak-t-{tag}", "runId": f"soak-r-{tag}", "protocolVersion": "1.0",
            "messages": [{"id": f"u-{tag}", "role": "user", "content": "work"}],
            "state": {}, "tools": [], "context": [], "forwardedProps": {"demo": knobs}}


async def read_all(c: httpx.AsyncClient, method: str, url: str, **kw: Any) -> httpx.Headers:
    async with c.stream(method, url, **kw) as resp:
        if resp.status_code != 200:
            raise Unexpected(f"{method} {url}: {resp.status_code} {await resp.aread()!r}")
        async for _ in resp.aiter_raw():
            pass
        return resp.headers


async def leave_early(c: httpx.AsyncClient, body: dict[str, Any], *,
                      until_id: bool = False) -> int:
    """POST a run and hang up after the first frame (or the first stored event: its seq)."""
    async with c.stream("POST", "/agents/demo", json=body) as resp:
        if resp.status_code != 200:
            raise Unexpected(f"admission: {resp.status_code} {await resp.aread()!r}")
        buf = b""
        async for chunk in resp.aiter_raw():
            buf += chunk
            if not until_id and b"\n\n" in buf:
                return 0
            if until_id and b"id: " in buf:
                line = buf[buf.index(b"id: ") + 4:].split(b"\n", 1)
                if len(line) == 2:
                    return int(line[0])
    raise Unexpected("the stream ended before its first frame")


async def final(c: httpx.AsyncClient, run_id: str, within: float = 120.0) -> dict[str, Any]:
    deadline = time.monotonic() + within
    while True:
        run = (await c.get(f"/runs/{run_id}")).json()
        if run["status"] in FINAL:
            return run
        if time.monotonic() > deadline:
            raise Unexpected(f"{run_id} still {run['status']} after {within:.0f} s")
        await asyncio.sleep(0.05)


def expect(run: dict[str, Any], status: str) -> None:
    if run["status"] != status:
        raise Unexpected(f"{run['runId']} ended {run['status']}, expected {status}: "
                         f"{run.get('error')}")


async def one(c: httpx.AsyncClient, kind: str) -> int:
    """Drive one run of ``kind`` until everything it started is final; runs admitted."""
    if kind in ("cancelled", "cancelled_wait"):
        body = demo_input(SLOW)
    elif kind == "failed":
        body = demo_input({**FAST, "fail_at": 1})
    elif kind.startswith("resumed"):
        body = demo_input({**FAST, "approve_at": [1]})
    else:
        body = demo_input(FAST)
    run_id, thread_id = body["runId"], body["threadId"]
    if kind in ("watched", "failed", "deleted"):
        await read_all(c, "POST", "/agents/demo", json=body)
    elif kind == "abandoned":
        await leave_early(c, body)
    elif kind == "cancelled":
        await leave_early(c, body)
        resp = await c.post(f"/runs/{run_id}/cancel")
        if resp.status_code not in (200, 202):
            raise Unexpected(f"cancel: {resp.status_code}")
    elif kind == "cancelled_wait":
        await leave_early(c, body)
        resp = await c.post(f"/runs/{run_id}/cancel", params={"wait": "true"})
        if resp.status_code != 200 or resp.json()["status"] != "cancelled":
            raise Unexpected(f"cancel?wait=true: {resp.status_code} {resp.text[:200]}")
    elif kind == "retried":
        await leave_early(c, body)
        headers = await read_all(c, "POST", "/agents/demo", json=body)
        if headers.get("outlast-replayed") != "true":
            raise Unexpected("the retry did not attach to the run")
    elif kind == "reattached":
        seq = await leave_early(c, body, until_id=True)
        await read_all(c, "GET", f"/runs/{run_id}/events",
                       headers={"Last-Event-ID": str(seq)})
    elif kind.startswith("resumed"):
        await read_all(c, "POST", "/agents/demo", json=body)
        run = await final(c, run_id)
        expect(run, "interrupted")
        answer = {"resume": [{"interruptId": i["id"], "status": "resolved",
                              "payload": {"approved": True}} for i in run["interrupts"]]}
        if kind == "resumed_sse":
            headers = await read_all(c, "POST", f"/threads/{thread_id}/resume", json=answer,
                                     headers={"Accept": "text/event-stream"})
            continuation = headers["outlast-run-id"]
        else:
            resp = await c.post(f"/threads/{thread_id}/resume", json=answer)
            if resp.status_code != 200:
                raise Unexpected(f"resume: {resp.status_code} {resp.text[:200]}")
            continuation = resp.json()["run"]["runId"]
        expect(await final(c, continuation), "succeeded")
        return 2
    run = await final(c, run_id)
    expect(run, {"cancelled": "cancelled", "cancelled_wait": "cancelled",
                 "failed": "failed"}.get(kind, "succeeded"))
    if kind == "deleted":
        resp = await c.delete(f"/threads/{thread_id}")
        if resp.status_code != 204 or (await c.get(f"/threads/{thread_id}")).status_code != 404:
            raise Unexpected(f"delete: {resp.status_code}")
    return 1


def metrics(text: str) -> dict[str, float]:
    """The outlast_* samples of a Prometheus exposition (labels kept in the name)."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("outlast_") and not line.startswith("outlast_commit_seconds"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


def sample(pid: int) -> dict[str, Any]:
    rss = []
    for _ in range(3):
        rss.append(rss_mb(pid))
        time.sleep(0.2)
    return {"rss_mb": median(rss), "fds": len(os.listdir(f"/proc/{pid}/fd"))}


async def soak(server: Server, runs: int, concurrency: int, name: str) -> dict[str, Any]:
    limits = httpx.Limits(max_connections=concurrency * 2, max_keepalive_connections=concurrency)
    out: dict[str, Any] = {"samples": [], "kinds": Counter(), "errors": []}
    async with httpx.AsyncClient(base_url=server.url, timeout=httpx.Timeout(120.0),
                                 limits=limits) as c:
        await asyncio.sleep(0.5)
        out["samples"].append({"runs": 0, "admitted": 0, "seconds": 0.0,
                               **sample(server.pid)})
        started = time.monotonic()
        admitted = 0
        for first in range(0, runs, ROUND):
            queue = [KINDS[i % len(KINDS)] for i in range(first, min(runs, first + ROUND))]

            async def worker(queue: list[str]) -> int:
                n = 0
                while queue:
                    kind = queue.pop()
                    try:
                        n += await one(c, kind)
                        out["kinds"][kind] += 1
                    except (Unexpected, httpx.HTTPError, KeyError) as e:
                        out["errors"].append(f"{kind}: {type(e).__name__}: {e}")
                return n

            admitted += sum(await asyncio.gather(*(worker(queue) for _ in range(concurrency))))
            done = min(runs, first + ROUND)
            m = metrics((await c.get("/metrics")).text)
            s = {"runs": done, "admitted": admitted,
                 "seconds": time.monotonic() - started, **sample(server.pid),
                 "executing": m.get("outlast_runs_executing", -1),
                 "subscribers": m.get("outlast_subscribers", -1),
                 "metrics": m}
            out["samples"].append(s)
            print(f"  {name:<8} {done:>6,} runs ({admitted:,} admitted) {s['seconds']:7.1f} s  "
                  f"RSS {s['rss_mb']:7.1f} MB  fds {s['fds']}  executing {s['executing']:.0f}"
                  f"  streams {s['subscribers']:.0f}  errors {len(out['errors'])}", flush=True)
    out["kinds"] = dict(out["kinds"])
    return out


def backends(only: str | None) -> list[str]:
    return [b for b in ("sqlite", "postgres") if only in (None, b)]


def run_backend(name: str, runs: int, concurrency: int, tmp: Path) -> dict[str, Any]:
    args = ["--drain-timeout", "1", "--log-level", "warning"]
    with contextlib.ExitStack() as stack:
        if name == "postgres":
            cluster, skipped = stack.enter_context(postgres_cluster())
            if cluster is None:
                return {"skipped": skipped}
            args += ["--store", cluster.fresh_database("soak")]
        print(f"{name}: {runs:,} runs, {concurrency} in flight", flush=True)
        with Server.outlast(tmp / name, *args) as server:
            return asyncio.run(soak(server, runs, concurrency, name))
    raise AssertionError("unreachable")


def growth(samples: list[dict[str, Any]]) -> float:
    """RSS growth from the first round's end to the last sample."""
    after_first = next(s for s in samples if s["runs"] >= min(ROUND, samples[-1]["runs"]))
    return float(samples[-1]["rss_mb"] - after_first["rss_mb"])


def plot(results: dict[str, Any], path: Path) -> None:
    series = {("SQLite" if name == "sqlite" else "PostgreSQL"):
              [(s["runs"], s["rss_mb"]) for s in r["samples"]]
              for name, r in results.items() if "samples" in r}
    line_chart(path, "RSS of one outlast serve process over finished runs",
               "runs finished", "RSS (MiB)", series)


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--runs", type=int, help="runs per backend (default 10,000; quick 2,000)")
    p.add_argument("--concurrency", type=int, default=32, help="runs in flight")
    p.add_argument("--only", choices=["sqlite", "postgres"])
    p.add_argument("--plot", type=Path, help="write the RSS chart here (SVG)")
    ns = p.parse_args()
    runs = ns.runs or (2000 if ns.quick else 10_000)
    print(f"machine: {machine()}; load average {os.getloadavg()[0]:.2f}")
    names = backends(ns.only)
    # Each backend in its own process, side by side: RSS does not depend on the pace,
    # and the two soaks then take the time of one.
    with tempfile.TemporaryDirectory(prefix="outlast-soak-") as tmp, \
            ProcessPoolExecutor(len(names)) as pool:
        jobs = {n: pool.submit(run_backend, n, runs, ns.concurrency, Path(tmp)) for n in names}
        results = {n: job.result() for n, job in jobs.items()}
    rows: list[tuple[str, ...]] = [("backend", "runs finished", "runs admitted", "seconds",
                                    "RSS MiB", "open fds", "executing", "open streams")]
    verdict: list[tuple[str, ...]] = []
    for name, r in results.items():
        label = "SQLite" if name == "sqlite" else "PostgreSQL"
        if "skipped" in r:
            rows.append((label, "skipped", r["skipped"], "", "", "", "", ""))
            continue
        for s in r["samples"]:
            rows.append((label, f"{s['runs']:,}", f"{s['admitted']:,}", f"{s['seconds']:.0f}",
                         f"{s['rss_mb']:.1f}", str(s["fds"]),
                         f"{s.get('executing', 0):.0f}", f"{s.get('subscribers', 0):.0f}"))
        g = growth(r["samples"])
        r["growth_mb"] = g
        verdict.append((label, f"{g:+.1f} MB", "yes" if g <= TARGET_MB else "NO",
                        str(len(r["errors"]))))
    if ns.plot:
        plot(results, ns.plot)
    report("resident memory over finished runs", results, rows, ns.json)
    print("\n  backend     RSS growth after the first 1,000 runs   ≤ 5 MB   unexpected outcomes")
    for label, g, ok, errors in verdict:
        print(f"  {label:<11} {g:>36}   {ok:<6}   {errors}")
    for name, r in results.items():
        for e in r.get("errors", [])[:10]:
            print(f"  {name} error: {e}")
    if any(r.get("errors") for r in results.values()):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
