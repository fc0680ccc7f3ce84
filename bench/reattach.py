"""Time to the first replayed event on reattach to a finished 20,000-event run.

A client that comes back sends ``Last-Event-ID``; we time from the request's start
to the first frame carrying an ``id`` (after the synthesized ``RUN_STARTED`` and the
re-opened constructs), then hang up. The resume points sit inside an open text
message, so every reattach also folds from the last boundary to re-open it.
Floor: the same request against the pre-encoded frames in memory (same server, same
HTTP stack, no store). Target: median ≤ 5 ms.

    python -m bench.reattach [--quick]
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

from bench.agents import bench_input
from bench.common import Server, client, finished_run, median, parser, read_stream, report

TARGET_MS = 5.0


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
        p10, p90 = ms[len(ms) // 10], ms[(len(ms) * 9) // 10]
        r["median"] = median(ms)
        ok = "" if name.startswith("floor") else ("yes" if r["median"] <= TARGET_MS else "NO")
        rows.append((name, str(len(ms)), f"{r['median']:.2f}", f"{p10:.2f}-{p90:.2f}", ok))
    return results, rows


def main() -> None:
    ns = parser(__doc__).parse_args()
    results, rows = asyncio.run(main_async(ns.quick))
    report("time to first replayed event on reattach", results, rows, ns.json)


if __name__ == "__main__":
    main()
