"""A turn of a long conversation whose client resends it, as AG-UI front ends do.

In process, on real SQLite files (``synchronous=FULL``), one per case, then on a
durable throwaway PostgreSQL cluster, one database per case: a thread that
already holds H messages (``bench.agents.resent_history``: questions, tool calls and
their results; H = 0, 60, 600, 3,000, an input of 0.2 KB to 1.8 MB), and turns whose
input resends those H messages unchanged with one new question. Each turn is admitted
and runs to its end (the bench agent, one event) before the next; the cases alternate
turn by turn. Timed:

- ``Engine.admit``: the whole admission (the input's checks, its fingerprint, the
  transaction, the claim that starts the run with its ``RUN_STARTED``);
- the store's transaction within it (``Store.admit``), which holds the one writer
  every other run's commits wait for;
- the whole turn, to the run's end: the execution's start (the thread's snapshot read
  into its fold, the agent's context with its input) and its one event.

The transaction checks the resent messages against the thread's copies (spec §3
``history_diverged``) and echoes what the thread does not hold: its cost should grow
with the input's bytes it must store and read, not with per-message work.

    python -m bench.resend [--quick]
"""

from __future__ import annotations

import asyncio
import tempfile
import time
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
)
from outlast.config import Settings
from outlast.engine.admission import RunOptions
from outlast.engine.runtime import Engine
from outlast.protocol.jsonutil import dumps
from outlast.store import open_store
from outlast.store.base import AdmitRequest, AdmitResult

OWNER = "local"
HISTORIES = (0, 60, 600, 3000)


class Conversation:
    """One store and the thread of H messages its turns resend."""

    def __init__(self, root: Path, messages: int, url: str | None) -> None:
        self.dir = root / f"h{messages}"
        self.dir.mkdir()
        self.url = url  # PostgreSQL's, or None for SQLite in ``dir``
        self.thread = f"conversation-{messages}"
        self.history = resent_history(self.thread, messages)
        self.turn = 0
        self.engine: Engine | None = None
        self.held: list[float] = []

    async def open(self) -> None:
        store = open_store(self.url, self.dir)
        settings = Settings(data_dir=self.dir, max_messages=10_000)
        self.engine = Engine(settings, store, {"bench": BenchAgent()})
        await store.open()
        self.engine.writer.start()
        admit = store.admit

        async def timed(req: AdmitRequest) -> AdmitResult:
            t0 = time.perf_counter()
            try:
                return await admit(req)
            finally:
                self.held.append((time.perf_counter() - t0) * 1000)

        store.admit = timed  # type: ignore[method-assign]

    async def close(self) -> None:
        assert self.engine is not None
        await self.engine.writer.stop()
        await self.engine.store.close()

    def input_bytes(self) -> int:
        return len(dumps(self.body("sizing")))

    def body(self, run_id: str) -> dict[str, Any]:
        body = bench_input(self.thread, run_id, 1)
        body["messages"] = [*self.history, *body["messages"]]
        return body

    async def one_turn(self) -> tuple[float, float, float]:
        """Admit a turn and let it run to its end; the admission's, its transaction's
        and the whole turn's ms."""
        engine = self.engine
        assert engine is not None
        self.turn += 1
        body = self.body(f"{self.thread}-{self.turn}")
        t0 = time.perf_counter()
        admitted = await engine.admit(OWNER, "bench", body, RunOptions())
        admission = (time.perf_counter() - t0) * 1000
        execution = engine.executions.get(admitted.run.rid)
        if execution is not None:  # its end, before the next turn
            await execution.done.wait()
        return admission, self.held[-1], (time.perf_counter() - t0) * 1000


async def measure(turns: int, cluster: Any = None) -> dict[str, Any]:
    """SQLite files, or databases of a PostgreSQL ``cluster``."""
    with tempfile.TemporaryDirectory(prefix="outlast-bench-") as tmp:
        cases = {str(h): Conversation(Path(tmp), h, cluster and cluster.fresh_database(
                     f"resend{h}")) for h in HISTORIES}
        for case in cases.values():
            await case.open()
        try:
            out = await alternating({h: c.one_turn for h, c in cases.items()},
                                    ("admit", "transaction", "turn"), turns, 3)
            for h, case in cases.items():
                out[h]["input_bytes"] = case.input_bytes()
            return out
        finally:
            for case in cases.values():
                await case.close()


async def main_async(quick: bool) -> tuple[dict[str, Any], list[tuple[str, ...]]]:
    turns = 20 if quick else 100
    results: dict[str, Any] = {"SQLite": await measure(turns)}
    with postgres_cluster() as (cluster, skipped):
        results["PostgreSQL"] = await measure(turns, cluster) if cluster else \
            {"skipped": skipped}
    rows: list[tuple[str, ...]] = [("store", "resent messages", "input",
                                    "admission ms (p10-p90)", "its transaction ms (p10-p90)",
                                    "transaction x none", "turn to its end ms (p10-p90)")]
    for backend, r in results.items():
        if "skipped" in r:
            rows.append((backend, r["skipped"], "", "", "", "", ""))
            continue
        base = median(r["0"]["transaction"])
        for h in map(str, HISTORIES):
            rows.append((backend, f"{int(h):,}", f"{r[h]['input_bytes'] / 1000:,.1f} KB",
                         median_p10_p90(r[h]["admit"]), median_p10_p90(r[h]["transaction"]),
                         f"{median(r[h]['transaction']) / base:.1f}x",
                         median_p10_p90(r[h]["turn"])))
    return results, rows


def main() -> None:
    ns = parser(__doc__).parse_args()
    results, rows = asyncio.run(main_async(ns.quick))
    report("a turn of a conversation its client resends", results, rows, ns.json)


if __name__ == "__main__":
    main()
