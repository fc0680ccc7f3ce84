"""Retention (spec §6): the events of runs final for longer than the window go, in short
batches; the run records and the thread snapshots stay; their events answer 410
``run_compacted``; the thread hydrates and goes on; the SQLite file stays bounded.

Store-level tests run against SQLite and the throwaway PostgreSQL; the HTTP tests
serve an in-process Engine over a real SQLite file on loopback.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from outlast.store.base import (
    AdmitRequest,
    FinishWrite,
    Freed,
    RunRecord,
    RunWrite,
    SnapshotWrite,
)
from outlast.store.postgres import PostgresStore
from outlast.store.sqlite import SQLiteStore
from outlast.store.sqlstore import SqlStore
from tests.support.inprocess import in_process_server
from tests.support.runs import run_record, uid
from tests.support.server import collect, demo_input, wait_for

PRINCIPAL = "alice"
TTL = 30.0


# -- the store ----------------------------------------------------------------------


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SqlStore]:
    s: SqlStore = SQLiteStore(tmp_path / "outlast.db") if request.param == "sqlite" else \
        PostgresStore(request.getfixturevalue("pg_url"), min_size=1, max_size=5)
    await s.open()
    try:
        yield s
    finally:
        await s.close()


async def finished_run(store: SqlStore, thread_id: str, run_id: str,
                       bodies: list[str]) -> RunRecord:
    """A run that wrote ``bodies`` as its log and a snapshot, then succeeded."""
    body = json.dumps({"threadId": thread_id, "runId": run_id})
    result = await store.admit(AdmitRequest(
        principal=PRINCIPAL, thread_id=thread_id, run_id=run_id, agent="demo", key=run_id,
        fingerprint=body, input_json=body, options_json="{}", multitask="reject", resume=[],
        has_new_input=True, title=None, now=time.time()))
    [run] = await store.claim_queued("me", TTL, 10)
    assert run.rid == result.run.rid
    message = json.dumps({"id": f"m-{run_id}", "role": "assistant", "content": "done"})
    await store.write([RunWrite(
        rid=run.rid, tid=run.tid, run_id=run.id, attempt=run.attempts, instance="me",
        prev_seq=0, events=[(i + 1, True, b) for i, b in enumerate(bodies)],
        snapshot=SnapshotWrite(run.id, len(bodies), upserts=[(f"m-{run_id}", 1.0, message)]),
        finish=FinishWrite("succeeded"))])
    record = await store.get_run_by_rid(run.rid)
    assert record is not None and record.status == "succeeded"
    return record


def utf8(bodies: list[str]) -> int:
    return sum(len(b.encode()) for b in bodies)


async def test_compact_removes_old_runs_events_and_keeps_records_and_snapshots(
        store: SqlStore) -> None:
    old = [json.dumps({"type": "TEXT", "delta": f"é{i}✓"}, ensure_ascii=False)
           for i in range(6)]
    r1 = await finished_run(store, "t1", "r1", old)
    r2 = await finished_run(store, "t2", "r2", old[:3])
    cutoff = time.time()
    young = await finished_run(store, "t3", "r3", old[:2])

    preview = await store.compactable(cutoff)
    assert preview == Freed(2, 9, utf8(old) + utf8(old[:3]))
    # The dry run changed nothing.
    assert len(await store.read_events(r1.rid, 0, 100)) == 6
    assert (await store.get_run_by_rid(r1.rid)).compacted_at is None  # type: ignore[union-attr]

    freed = Freed()
    while (batch := await store.compact(cutoff, time.time(), 100, 1000)) is not None:
        freed += batch
        await store.reclaim()
    assert freed == preview
    assert await store.compactable(cutoff) == Freed()
    for run in (r1, r2):
        assert await store.read_events(run.rid, 0, 100) == []
        kept = await store.get_run_by_rid(run.rid)
        assert kept is not None and kept.status == "succeeded" and kept.last_seq == run.last_seq
        assert kept.compacted_at is not None
        snapshot = await store.get_snapshot(run.tid)
        assert [m["id"] for m in snapshot.messages] == [f"m-{run.id}"]
    # A run that ended after the cutoff keeps its log.
    assert len(await store.read_events(young.rid, 0, 100)) == 2
    assert (await store.get_run_by_rid(young.rid)).compacted_at is None  # type: ignore[union-attr]


async def test_batches_are_bounded_and_a_long_log_goes_over_several(store: SqlStore) -> None:
    long = [json.dumps({"type": "TEXT", "n": i}) for i in range(25)]
    big = await finished_run(store, "big", "big", long)
    small = [await finished_run(store, f"s{i}", f"s{i}", long[:4]) for i in range(5)]
    cutoff = time.time()
    batches: list[Freed] = []
    while (batch := await store.compact(cutoff, time.time(), 3, 10)) is not None:
        batches.append(batch)
        record = await store.get_run_by_rid(big.rid)
        # Marked in the first batch: no reader is ever served part of its log.
        assert record is not None and record.compacted_at is not None
    assert all(b.events <= 10 and b.runs <= 3 for b in batches)
    total = Freed()
    for b in batches:
        total += b
    assert total == Freed(6, 25 + 20, utf8(long) + 5 * utf8(long[:4]))
    for run in (big, *small):
        assert await store.read_events(run.rid, 0, 100) == []
    # Nothing left over: a second pass finds no work.
    assert await store.compact(time.time(), time.time(), 3, 10) is None


async def test_a_long_log_interrupted_midway_is_finished_after_reopening(
        tmp_path: Path) -> None:
    path = tmp_path / "outlast.db"
    store = SQLiteStore(path)
    await store.open()
    run = await finished_run(store, "t", "r", [json.dumps({"n": i}) for i in range(30)])
    cutoff = time.time()
    first = await store.compact(cutoff, time.time(), 10, 10)
    assert first == Freed(1, 10, first.bytes if first else 0)
    await store.close()  # as if the process stopped here

    store = SQLiteStore(path)
    await store.open()
    try:
        assert (await store.compactable(cutoff)).events == 20
        while await store.compact(cutoff, time.time(), 10, 10) is not None:
            pass
        assert await store.read_events(run.rid, 0, 100) == []
    finally:
        await store.close()


def pages(path: Path) -> int:
    con = sqlite3.connect(path)
    try:
        return int(con.execute("PRAGMA page_count").fetchone()[0])
    finally:
        con.close()


async def test_a_new_sqlite_file_gives_freed_space_back(tmp_path: Path) -> None:
    path = tmp_path / "outlast.db"
    store = SQLiteStore(path)
    await store.open()
    try:
        for i in range(10):
            await finished_run(store, f"t{i}", f"r{i}",
                               [json.dumps({"pad": "x" * 2000, "n": n}) for n in range(100)])
        full = pages(path)
        while await store.compact(time.time(), time.time(), 100, 1000) is not None:
            await store.reclaim()
        for _ in range(20):  # each call hands back a bounded number of pages
            await store.reclaim()
        # The database's size as committed (the file itself follows at the next
        # checkpoint): the freed pages are gone, not only marked free.
        assert pages(path) < full / 2
    finally:
        await store.close()


async def test_an_older_sqlite_file_is_converted_to_incremental_vacuum(tmp_path: Path) -> None:
    path = tmp_path / "outlast.db"
    con = sqlite3.connect(path)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("CREATE TABLE kept (x TEXT)")
    con.execute("INSERT INTO kept VALUES ('still here')")
    con.commit()
    assert con.execute("PRAGMA auto_vacuum").fetchone()[0] == 0
    con.close()
    store = SQLiteStore(path)
    await store.open()
    await store.close()
    con = sqlite3.connect(path)
    try:
        assert con.execute("PRAGMA auto_vacuum").fetchone()[0] == 2  # INCREMENTAL
        assert con.execute("SELECT x FROM kept").fetchall() == [("still here",)]
    finally:
        con.close()


# -- over HTTP ----------------------------------------------------------------------


def quick(thread_id: str, run_id: str, text: str = "do the work", **knobs: Any) -> dict[str, Any]:
    pace = {"steps": 1, "step_delay_ms": 0, "tokens_per_message": 4, "token_delay_ms": 0}
    return demo_input(thread_id, run_id, text, **{**pace, **knobs})


async def run_to_end(client: httpx.AsyncClient, body: dict[str, Any]) -> list[dict[str, Any]]:
    resp, frames = await collect(client, "POST", "/agents/demo", json=body)
    assert resp.status_code == 200, resp.text
    events = [f.event for f in frames]
    assert events[-1]["type"] == "RUN_FINISHED", events[-1]
    return events


async def compacted(client: httpx.AsyncClient, run_id: str) -> dict[str, Any]:
    async def done() -> dict[str, Any] | None:
        record = await run_record(client, run_id)
        return record if record["compactedAt"] is not None else None

    result: dict[str, Any] = await wait_for(done, timeout=30, interval=0.1)
    return result


async def test_old_runs_answer_410_and_their_thread_hydrates_and_goes_on(
        tmp_path: Path) -> None:
    async with in_process_server(tmp_path, event_retention=1.0) as srv:
        c = srv.client
        thread, first = uid("t"), uid("r")
        body = quick(thread, first, "first question")
        await run_to_end(c, body)
        record = await compacted(c, first)
        assert record["status"] == "succeeded" and record["lastSeq"] > 0

        resp = await c.get(f"/runs/{first}/events")
        assert resp.status_code == 410
        error = resp.json()["error"]
        assert error["code"] == "run_compacted" and error["runId"] == first
        assert "retention" in error["message"] and f"/runs/{first}" in error["message"]
        resp = await c.get(f"/runs/{first}/events", headers={"Last-Event-ID": "2"})
        assert resp.status_code == 410
        # A retried POST would replay the removed log: refused the same way.
        resp, frames = await collect(c, "POST", "/agents/demo", json=body)
        assert resp.status_code == 410 and frames == []
        assert resp.json()["error"]["code"] == "run_compacted"

        # The thread hydrates from its snapshot...
        _, frames = await collect(c, "POST", "/agents/demo",
                                  json=demo_input(thread, uid("h"), messages=[]))
        [snapshot] = [f.event for f in frames if f.event["type"] == "MESSAGES_SNAPSHOT"]
        texts = [m.get("content") for m in snapshot["messages"]]
        assert "first question" in texts
        assert any(m["role"] == "assistant" for m in snapshot["messages"])
        # ...and goes on: a new run sees the history and finishes.
        second = uid("r")
        events = await run_to_end(c, quick(thread, second, "second question"))
        assert events[0]["type"] == "RUN_STARTED"
        view = (await c.get(f"/threads/{thread}")).json()
        contents = [m.get("content") for m in view["messages"]]
        assert contents.index("first question") < contents.index("second question")

        # ...and forks: at its latest boundary (from the snapshot) the fork holds the
        # whole conversation; a point inside a compacted run answers 410 and changes nothing.
        await compacted(c, second)
        resp = await c.post(f"/threads/{thread}/fork", json={})
        assert resp.status_code == 201, resp.text
        fork = resp.json()
        assert fork["forkedFrom"]["threadId"] == thread
        forked = (await c.get(f"/threads/{fork['threadId']}")).json()
        assert forked["messages"] == view["messages"]
        resp = await c.post(f"/threads/{thread}/fork",
                            json={"asOf": {"runId": first, "seq": 1}})
        assert resp.status_code == 410 and resp.json()["error"]["code"] == "run_compacted"
        threads = (await c.get("/threads")).json()["threads"]
        assert len(threads) == 2  # the original and the one fork, nothing more


async def test_admin_gc_dry_run_reports_and_changes_nothing_then_frees(
        tmp_path: Path) -> None:
    async with in_process_server(tmp_path) as srv:  # no --event-retention: keep all
        c = srv.client
        runs = [uid("r") for _ in range(3)]
        logged = 0
        for run_id in runs:
            await run_to_end(c, quick(uid("t"), run_id))
            text = (await c.get(f"/runs/{run_id}/events?follow=false")).text
            logged += sum(len(line[6:].encode()) for line in text.split("\n")
                          if line.startswith("data: "))
        resp = await c.post("/admin/gc", params={"dryRun": "true"})
        assert resp.status_code == 422  # no window on the server, none given
        resp = await c.post("/admin/gc", params={"dryRun": "true", "olderThan": "1e-6"})
        assert resp.status_code == 200, resp.text
        report = resp.json()
        assert report["dryRun"] is True and report["runs"] == 3 and report["bytes"] == logged
        for run_id in runs:
            assert (await c.get(f"/runs/{run_id}/events?follow=false")).status_code == 200
        resp = await c.post("/admin/gc", params={"olderThan": "1e-6"})
        assert resp.json() == {**report, "dryRun": False}
        for run_id in runs:
            assert (await c.get(f"/runs/{run_id}/events")).status_code == 410
        resp = await c.post("/admin/gc", params={"olderThan": "1e-6"})
        assert (resp.json()["runs"], resp.json()["events"]) == (0, 0)
        for bad in ("0", "-1", "nan", "inf", "x"):
            resp = await c.post("/admin/gc", params={"olderThan": bad})
            assert resp.status_code == 422, bad


def file_size(data_dir: Path) -> int:
    """The SQLite store's bytes on disk: the database and its WAL."""
    return sum(p.stat().st_size for p in data_dir.glob("outlast.db*") if p.is_file())


async def test_the_sqlite_file_stops_growing_under_steady_load(tmp_path: Path) -> None:
    async with in_process_server(tmp_path) as srv:
        c = srv.client
        sizes = []
        for _ in range(4):
            for _ in range(50):
                # Several hundred events a run, like a model streaming token by token.
                await run_to_end(c, quick(uid("t"), uid("r"), steps=2, tokens_per_message=120))
            sizes.append(file_size(tmp_path))  # this round's events, the earlier ones gone
            resp = await c.post("/admin/gc", params={"olderThan": "1e-6"})
            assert resp.json()["runs"] == 50
        # What stays is each thread's own rows (its messages, snapshot and runs: about 7 KB
        # a run here), and the WAL's size moves with when checkpoints ran: a few percent
        # a round. Events kept (no reuse of their pages) would add a whole first round's
        # worth each round, 2.5x by the fourth.
        assert max(sizes[1:]) <= sizes[0] * 1.5, sizes
