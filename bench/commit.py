"""A group commit's cost per run in it, for runs whose clients resend a history.

At a model's pace each commit holds an event or two from every run streaming, so what
a commit costs grows with the runs in it, and whatever it rewrites per run is paid at
every commit. AG-UI front ends resend the whole conversation with every run, and the
run's record keeps that input. Here, in process on a real SQLite file (the server's
default ``synchronous=FULL``), two sets of N running runs are written alternately, a
commit of one event for every run of a set at a time (``Store.write``, the writer's
own call), after each run has a few dozen events already:

- ``history``: each run's input resends a 60-message conversation (36 KB of JSON,
  ``bench.agents.resent_history``), as a real client's does;
- ``short`` (the baseline): each run's input is one short message.

Per commit: wall time, and bytes the process wrote (``/proc/self/io``, the WAL and its
fsyncs included). Target: a resent history costs a commit no more than a short input,
within 1.2x, in both.

    python -m bench.commit [--quick] [--runs 300]
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.agents import BenchAgent, bench_input, resent_history
from bench.common import alternating, median, parser, report
from outlast.config import Settings
from outlast.engine.runtime import Engine, RunOptions
from outlast.protocol.jsonutil import dumps
from outlast.store import open_store
from outlast.store.base import RunRecord, RunWrite, StoredEvent

TARGET = 1.2
OWNER = "local"
HISTORY = 60


def written() -> int:
    """Bytes this process has passed to write calls so far."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("wchar:"):
            return int(line.split()[1])
    raise RuntimeError("no wchar in /proc/self/io")


async def running(engine: Engine, kind: str, n: int) -> list[RunRecord]:
    """``n`` runs of one kind, each on its own thread, admitted and started (leased to
    this engine with their ``RUN_STARTED`` logged) as the server admits them."""
    runs = []
    for i in range(n):
        thread_id, run_id = f"{kind}-t{i}", f"{kind}-r{i}"
        body = bench_input(thread_id, run_id, 10)
        if kind == "history":
            body["messages"] = [*resent_history(run_id, HISTORY), *body["messages"]]
        admitted = await engine.admit(OWNER, "bench", body, RunOptions())
        [run] = [r for r in admitted.claimed if r.rid == admitted.run.rid]
        runs.append(run)
    assert all(r.status == "running" and r.last_seq == 1 for r in runs)
    return runs


class Runs:
    """One set of leased runs and where each one's log is."""

    def __init__(self, engine: Engine, runs: list[RunRecord]) -> None:
        self.engine = engine
        self.runs = runs
        self.seq = {r.rid: r.last_seq for r in runs}

    async def commit(self) -> tuple[float, int]:
        """One commit of one content event for every run; its ms and bytes written."""
        batch = []
        for r in self.runs:
            seq = self.seq[r.rid]
            body = dumps({"type": "TEXT_MESSAGE_CONTENT", "messageId": f"m-{r.id}",
                          "delta": f" token {seq}", "timestamp": int(time.time() * 1000)})
            batch.append(RunWrite(rid=r.rid, tid=r.tid, run_id=r.id, attempt=r.attempts,
                                  instance=self.engine.instance, prev_seq=seq,
                                  events=[StoredEvent(seq + 1, False, body)]))
        before = written()
        t0 = time.perf_counter()
        fenced = await self.engine.store.write(batch)
        elapsed = (time.perf_counter() - t0) * 1000
        assert not fenced
        for r in self.runs:
            self.seq[r.rid] += 1
        return elapsed, written() - before


async def measure(n: int, commits: int, warm: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="outlast-bench-") as tmp:
        store = open_store(None, Path(tmp))
        engine = Engine(Settings(data_dir=Path(tmp)), store, {"bench": BenchAgent()})
        await store.open()
        try:
            sets = {kind: Runs(engine, await running(engine, kind, n))
                    for kind in ("history", "short")}
            return await alternating({kind: s.commit for kind, s in sets.items()},
                                     ("ms", "bytes"), commits, warm)
        finally:
            await store.close()


async def main_async(n: int, quick: bool) -> tuple[dict[str, Any], list[tuple[str, ...]]]:
    r = await measure(n, 20 if quick else 100, 10 if quick else 40)
    rows: list[tuple[str, ...]] = [(
        "runs' inputs", "runs per commit", "ms per commit (p10-p90)", "µs per run",
        "KB written per run", "time vs short", "bytes vs short", f"≤ {TARGET}")]
    base_ms, base_bytes = median(r["short"]["ms"]), median(r["short"]["bytes"])
    for kind, label in (("history", f"{HISTORY}-message history"), ("short", "short")):
        ms = sorted(r[kind]["ms"])
        nbytes = median(r[kind]["bytes"])
        r[kind]["ratio_ms"] = median(ms) / base_ms
        r[kind]["ratio_bytes"] = nbytes / base_bytes
        ok = r[kind]["ratio_ms"] <= TARGET and r[kind]["ratio_bytes"] <= TARGET
        rows.append((label, str(n), f"{median(ms):.2f} ({ms[len(ms) // 10]:.2f}-"
                     f"{ms[(len(ms) * 9) // 10]:.2f})", f"{median(ms) / n * 1000:.1f}",
                     f"{nbytes / n / 1024:.1f}", f"{r[kind]['ratio_ms']:.2f}",
                     f"{r[kind]['ratio_bytes']:.2f}", "" if kind == "short" else
                     ("yes" if ok else "NO")))
    r["runs"] = n
    return r, rows


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--runs", type=int, default=300, help="runs in each commit")
    ns = p.parse_args()
    results, rows = asyncio.run(main_async(100 if ns.quick and ns.runs == 300 else ns.runs,
                                           ns.quick))
    report("commit cost per run", results, rows, ns.json)


if __name__ == "__main__":
    main()
