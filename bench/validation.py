"""What G11's checks of agents' events cost a durable stream.

One bench server; the same durable route (``POST /agents/bench``: admission, the
fold, group commit, publish) with the checks of every emitted event on (the schema of
its ``ag_ui.core`` model and the ordering rules) and off (``PUT /bench/validation/off``,
a switch only the bench server has). Reps alternate between the two in one process.
Target: with validation on, events/s ≥ 0.9x with it off (medians).

    python -m bench.validation [--quick]
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

from bench.common import Server, client, paired, paired_row, parser, report
from bench.stream_throughput import one

TARGET = 0.9
ROUTE = "/agents/bench"


async def measure(url: str, events: int, reps: int, yield_every: int) -> dict[str, Any]:
    async with client(url) as c:
        rates: dict[str, list[float]] = {"on": [], "off": []}
        frames: set[int] = set()

        async def timed(state: str, n: int) -> tuple[float, int]:
            (await c.put(f"/bench/validation/{state}")).raise_for_status()
            return await one(c, ROUTE, n, yield_every)

        for state in ("on", "off"):  # warm up both
            await timed(state, min(events, 2000))
        for rep in range(reps):
            for state in (("on", "off") if rep % 2 == 0 else ("off", "on")):
                rate, n = await timed(state, events)
                frames.add(n)
                rates[state].append(rate)
        (await c.put("/bench/validation/on")).raise_for_status()
    if len(frames) != 1:
        raise RuntimeError(f"the streams differ in length: {frames}")
    return {"events": frames.pop(), "reps": reps, "yield_every": yield_every,
            "on": rates["on"], "off": rates["off"], **paired(rates["on"], rates["off"])}


def row(label: str, r: dict[str, Any]) -> tuple[str, ...]:
    return paired_row(label, r, "on", "off", TARGET)


async def main_async(quick: bool) -> tuple[dict[str, Any], list[tuple[str, ...]]]:
    events = 5000 if quick else 20000
    reps = 3 if quick else 9
    results: dict[str, Any] = {}
    rows: list[tuple[str, ...]] = [
        ("case", "events/run", "reps", "validated ev/s median (min-max)",
         "unvalidated ev/s median (min-max)", "ratio", f"≥ {TARGET}")]
    with tempfile.TemporaryDirectory(prefix="outlast-bench-") as tmp, \
            Server.bench(Path(tmp)) as server:
        # yield_every=1: an await per event, as a model's stream; 50: bursts.
        for yield_every in (1, 50):
            r = await measure(server.url, events, reps, yield_every)
            key = f"yield_every={yield_every}"
            results[key] = r
            rows.append(row(key, r))
    return results, rows


def main() -> None:
    ns = parser(__doc__).parse_args()
    results, rows = asyncio.run(main_async(ns.quick))
    report("the cost of validating what agents emit (G11), one run, one client",
           results, rows, ns.json)


if __name__ == "__main__":
    main()
