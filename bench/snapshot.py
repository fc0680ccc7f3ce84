"""Boundary snapshot save time with 10 vs 10,000 messages already in the thread.

In process, on a real SQLite store: a run executes on a thread whose snapshot
already holds M messages; each turn folds one streamed assistant message and a
state delta, commits those events, then saves the boundary. Timed separately:

- ``Snapshots.write``: take the fold's changes and serialize them;
- ``store.write`` of the boundary ``SnapshotWrite`` (one transaction, fsync'd).

Target: time(10,000 messages) ≤ 1.5 x time(10 messages), for both and their sum.

    python -m bench.snapshot [--quick]
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.agents import BenchAgent, bench_input
from bench.common import median, median_p10_p90, parser, report
from outlast.config import Settings
from outlast.engine.admission import RunOptions
from outlast.engine.execution import RunExecution
from outlast.engine.runtime import Engine
from outlast.protocol.events import now_ms
from outlast.protocol.jsonutil import dumps
from outlast.store import open_store
from outlast.store.base import FinishWrite, RunRecord, RunWrite, SnapshotWrite

TARGET = 1.5
OWNER = "local"


def history(count: int) -> list[tuple[str, float, str]]:
    """``count`` messages of a realistic size, alternating user and assistant."""
    out = []
    for i in range(count):
        role = "user" if i % 2 == 0 else "assistant"
        text = f"message {i}: " + "some words of a conversation that went on for a while " * 5
        out.append((f"m{i}", float(i + 1), dumps({"id": f"m{i}", "role": role, "content": text})))
    return out


async def leased_run(engine: Engine, thread_id: str, run_id: str) -> RunRecord:
    """Admit a run and lease it to this engine, as the scheduler would. The engine's
    room is held while it admits, so the run stays queued for this bench to drive
    rather than being started (and run by the bench agent) with its admission."""
    with engine._reserving(engine.settings.max_runs):
        admitted = await engine.admit(OWNER, "bench", bench_input(thread_id, run_id, 10),
                                      RunOptions())
    assert admitted.run.status == "queued" and not admitted.claimed, admitted.run
    runs = await engine.store.claim_queued(engine.instance, 60.0, 1)
    assert runs and runs[0].id == run_id
    return runs[0]


async def prepared(engine: Engine, messages: int) -> RunExecution:
    """A running execution on a thread whose snapshot holds ``messages`` messages."""
    thread_id = f"thread-{messages}"
    seed = await leased_run(engine, thread_id, f"seed-{messages}")
    started = dumps({"type": "RUN_STARTED", "threadId": thread_id, "runId": seed.id})
    finished = dumps({"type": "RUN_FINISHED", "threadId": thread_id, "runId": seed.id})
    await engine.store.write([RunWrite(
        rid=seed.rid, tid=seed.tid, run_id=seed.id, attempt=seed.attempts,
        instance=engine.instance, prev_seq=0, events=[(1, True, started), (2, True, finished)],
        snapshot=SnapshotWrite(as_of_run=seed.id, as_of_seq=2, upserts=history(messages)),
        finish=FinishWrite("succeeded", outcome={"type": "success"}))])
    run = await leased_run(engine, thread_id, f"run-{messages}")
    ex = RunExecution(engine.services, run, engine.agents["bench"], crashed=False)
    await ex._prepare()  # loads the snapshot into the fold, appends RUN_STARTED
    await ex.flush()
    assert len(ex.fold.messages) == messages + 1  # the history and the run's user message
    return ex


def turn_events(ex: RunExecution, turn: int) -> list[dict[str, Any]]:
    mid = f"a-{ex.run.id}-{turn}"
    return [{"type": "TEXT_MESSAGE_START", "messageId": mid, "role": "assistant"},
            *({"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": f" word{i}"}
              for i in range(20)),
            {"type": "TEXT_MESSAGE_END", "messageId": mid},
            {"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/turn", "value": turn}]}]


async def one_turn(ex: RunExecution, turn: int) -> tuple[float, float]:
    """Fold and commit one turn's events (untimed), then time the boundary save."""
    store = ex.services.store
    rows = []
    for event in turn_events(ex, turn):
        event["timestamp"] = now_ms()
        ex.fold.apply(event)
        ex.seq += 1
        rows.append((ex.seq, ex.fold.at_boundary, dumps(event)))
    ex.snapshots.session_state["turn"] = turn  # agents keep private state; it is saved too
    base = RunWrite(rid=ex.run.rid, tid=ex.run.tid, run_id=ex.run.id,
                    attempt=ex.run.attempts, instance=ex.services.instance,
                    prev_seq=ex.channel.committed_seq, events=rows)
    assert not await store.write([base])
    ex.channel.committed_seq = ex.seq
    t0 = time.perf_counter()
    snap = ex.snapshots.write(ex.fold, ex.seq)
    t1 = time.perf_counter()
    fenced = await store.write([RunWrite(
        rid=ex.run.rid, tid=ex.run.tid, run_id=ex.run.id, attempt=ex.run.attempts,
        instance=ex.services.instance, prev_seq=ex.seq, snapshot=snap)])
    t2 = time.perf_counter()
    assert not fenced and len(snap.upserts) == 1
    return (t1 - t0) * 1000, (t2 - t1) * 1000


async def full_rewrite(ex: RunExecution) -> float:
    """For contrast: one write that rewrites every message of the snapshot."""
    upserts = [(m["id"], ex.snapshots.positions.get(m["id"], float(i + 1)), dumps(m))
               for i, m in enumerate(ex.fold.messages)]
    t0 = time.perf_counter()
    await ex.services.store.write([RunWrite(
        rid=ex.run.rid, tid=ex.run.tid, run_id=ex.run.id, attempt=ex.run.attempts,
        instance=ex.services.instance, prev_seq=ex.seq,
        snapshot=SnapshotWrite(as_of_run=ex.run.id, as_of_seq=ex.seq, upserts=upserts))])
    return (time.perf_counter() - t0) * 1000


async def measure(synchronous: str, turns: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="outlast-bench-") as tmp:
        settings = Settings(data_dir=Path(tmp), sqlite_synchronous=synchronous)
        store = open_store(None, Path(tmp), sqlite_synchronous=synchronous)
        engine = Engine(settings, store, {"bench": BenchAgent()})
        await store.open()
        engine.writer.start()
        try:
            small = await prepared(engine, 10)
            large = await prepared(engine, 10000)
            cases = {"10": small, "10000": large}
            out: dict[str, Any] = {m: {"snapshot_write": [], "store_write": []} for m in cases}
            for turn in range(5):  # warm-up
                for ex in cases.values():
                    await one_turn(ex, turn)
            for turn in range(5, turns + 5):  # interleaved, so drift hits both alike
                for m, ex in cases.items():
                    a, b = await one_turn(ex, turn)
                    out[m]["snapshot_write"].append(a)
                    out[m]["store_write"].append(b)
            out["full_rewrite_10000"] = [await full_rewrite(large) for _ in range(3)]
        finally:
            await engine.writer.stop()
            await store.close()
    return out


async def main_async(quick: bool) -> tuple[dict[str, Any], list[tuple[str, ...]]]:
    turns = 40 if quick else 300
    rows: list[tuple[str, ...]] = [("synchronous", "part", "10 msgs median ms (p10-p90)",
             "10,000 msgs median ms (p10-p90)", "growth", f"≤ {TARGET}")]
    results: dict[str, Any] = {}
    for synchronous in (("FULL",) if quick else ("FULL", "NORMAL")):
        r = await measure(synchronous, turns)
        results[synchronous] = r
        for part in ("snapshot_write", "store_write", "total"):
            cells = []
            medians = []
            for m in ("10", "10000"):
                if part == "total":
                    v = [a + b for a, b in zip(r[m]["snapshot_write"], r[m]["store_write"],
                                               strict=True)]
                else:
                    v = r[m][part]
                medians.append(median(v))
                cells.append(median_p10_p90(v, 3))
            growth = medians[1] / medians[0]
            r[f"growth_{part}"] = growth
            label = {"snapshot_write": "Snapshots.write (take_changes + JSON)",
                     "store_write": "store.write(SnapshotWrite)", "total": "total"}[part]
            rows.append((synchronous, label, *cells, f"{growth:.2f}x",
                         "yes" if growth <= TARGET else "NO"))
        rewrite = median(r["full_rewrite_10000"])
        rows.append((synchronous, "contrast: rewriting all 10,000", "", f"{rewrite:.1f}", "", ""))
    return results, rows


def main() -> None:
    ns = parser(__doc__).parse_args()
    results, rows = asyncio.run(main_async(ns.quick))
    report("boundary snapshot save", results, rows, ns.json)


if __name__ == "__main__":
    main()
