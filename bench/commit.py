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

Per commit: wall time, and bytes written (SQLite: what the process passed to write
calls, ``/proc/self/io``, the WAL included; PostgreSQL: how far the commit moved the
WAL). The same on a throwaway PostgreSQL cluster when its server binaries are installed
(``tests/support/postgres.py``), else skipped with the reason. Target: a resent history
costs a commit no more than a short input, within 1.2x, in both.

    python -m bench.commit [--quick] [--runs 300] [--no-postgres]
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bench.agents import BenchAgent, bench_input, resent_history
from bench.common import (
    alternating,
    median,
    median_p10_p90,
    parser,
    postgres_cluster,
    report,
    started_run,
)
from outlast.config import Settings
from outlast.engine.admission import RunOptions
from outlast.engine.runtime import Engine
from outlast.protocol.jsonutil import dumps
from outlast.store import open_store
from outlast.store.base import RunRecord, RunWrite, StoredEvent

TARGET = 1.2
OWNER = "local"
HISTORY = 60


def _wchar() -> int:
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("wchar:"):
            return int(line.split()[1])
    raise RuntimeError("no wchar in /proc/self/io")


async def process_written() -> int:
    """Bytes this process has passed to write calls so far (SQLite writes in process)."""
    return _wchar()


def wal_written(con: Any) -> Callable[[], Awaitable[int]]:
    """Where PostgreSQL's WAL is, in bytes, read on a connection of its own."""
    async def position() -> int:
        return int(await con.fetchval(
            "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::bigint"))
    return position


async def running(engine: Engine, kind: str, n: int) -> list[RunRecord]:
    """``n`` runs of one kind, each on its own thread, admitted and started (leased to
    this engine with their ``RUN_STARTED`` logged) as the server admits them."""
    runs = []
    for i in range(n):
        thread_id, run_id = f"{kind}-t{i}", f"{kind}-r{i}"
        body = bench_input(thread_id, run_id, 10)
        if kind == "history":
            body["messages"] = [*resent_history(run_id, HISTORY), *body["messages"]]
        runs.append(started_run(await engine.admit(OWNER, "bench", body, RunOptions())))
    return runs


class Runs:
    """One set of leased runs and where each one's log is."""

    def __init__(self, engine: Engine, runs: list[RunRecord],
                 written: Callable[[], Awaitable[int]]) -> None:
        self.engine = engine
        self.runs = runs
        self.written = written
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
        before = await self.written()
        t0 = time.perf_counter()
        fenced = await self.engine.store.write(batch)
        elapsed = (time.perf_counter() - t0) * 1000
        assert not fenced
        for r in self.runs:
            self.seq[r.rid] += 1
        return elapsed, await self.written() - before


async def measure(url: str | None, n: int, commits: int, warm: int) -> dict[str, Any]:
    """Both sets on one store: SQLite in a temporary directory, or PostgreSQL at ``url``."""
    with tempfile.TemporaryDirectory(prefix="outlast-bench-") as tmp:
        store = open_store(url, Path(tmp))
        engine = Engine(Settings(data_dir=Path(tmp)), store, {"bench": BenchAgent()})
        await store.open()
        side = None
        try:
            written = process_written
            if url is not None:
                import asyncpg

                side = await asyncpg.connect(url)
                written = wal_written(side)
            sets = {kind: Runs(engine, await running(engine, kind, n), written)
                    for kind in ("history", "short")}
            return await alternating({kind: s.commit for kind, s in sets.items()},
                                     ("ms", "bytes"), commits, warm)
        finally:
            if side is not None:
                await side.close()
            await store.close()


def table_rows(backend: str, r: dict[str, Any], n: int) -> list[tuple[str, ...]]:
    out = []
    base_ms, base_bytes = median(r["short"]["ms"]), median(r["short"]["bytes"])
    for kind, label in (("history", f"{HISTORY}-message history"), ("short", "short")):
        ms = r[kind]["ms"]
        nbytes = median(r[kind]["bytes"])
        r[kind]["ratio_ms"] = median(ms) / base_ms
        r[kind]["ratio_bytes"] = nbytes / base_bytes
        ok = r[kind]["ratio_ms"] <= TARGET and r[kind]["ratio_bytes"] <= TARGET
        out.append((backend, label, str(n), median_p10_p90(ms), f"{median(ms) / n * 1000:.1f}",
                    f"{nbytes / n / 1024:.1f}", f"{r[kind]['ratio_ms']:.2f}",
                    f"{r[kind]['ratio_bytes']:.2f}", "" if kind == "short" else
                    ("yes" if ok else "NO")))
    return out


async def main_async(n: int, quick: bool, postgres: Any,
                     ) -> tuple[dict[str, Any], list[tuple[str, ...]]]:
    commits, warm = (20, 10) if quick else (100, 40)
    rows: list[tuple[str, ...]] = [(
        "backend", "runs' inputs", "runs per commit", "ms per commit (p10-p90)",
        "µs per run", "KB written per run", "time vs short", "bytes vs short", f"≤ {TARGET}")]
    results: dict[str, Any] = {"runs": n}
    backends = [("SQLite", None)]
    if postgres is not None:
        backends.append(("PostgreSQL", postgres.fresh_database("commit")))
    for backend, url in backends:
        results[backend] = await measure(url, n, commits, warm)
        rows += table_rows(backend, results[backend], n)
    return results, rows


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--runs", type=int, default=300, help="runs in each commit")
    p.add_argument("--no-postgres", action="store_true")
    ns = p.parse_args()
    n = 100 if ns.quick and ns.runs == 300 else ns.runs
    with contextlib.ExitStack() as stack:
        cluster, skipped = (None, "PostgreSQL: skipped (--no-postgres)") if ns.no_postgres \
            else stack.enter_context(postgres_cluster())
        results, rows = asyncio.run(main_async(n, ns.quick, cluster))
    if skipped:
        print(skipped)
    results["skipped"] = skipped
    report("commit cost per run", results, rows, ns.json)


if __name__ == "__main__":
    main()
