"""The engine's parts in-process, without HTTP: the writer's group commit, the hub's
feeds and an execution driving an agent, each against a real SQLite file."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from outlast.agent import Agent, AgentError, RunContext
from outlast.config import Settings
from outlast.engine import runtime
from outlast.engine import trim as trim_module
from outlast.engine.admission import RunOptions
from outlast.engine.hub import Hub
from outlast.engine.runtime import Engine
from outlast.engine.trim import malloc_trim
from outlast.engine.writer import BACKLOG, MIN_BACKLOG, Writer
from outlast.store.base import FINAL, AdmitRequest, RunRecord, RunWrite
from outlast.store.sqlite import SQLiteStore
from tests.support.scripted_agent import ScriptedAgent


class Steps(Agent):
    """Emits one message per step, each step's side effect journaled under its number."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.gate = asyncio.Event()

    async def run(self, ctx: RunContext) -> Any:
        props = ctx.forwarded_props or {}
        for step in range(props.get("steps", 2)):
            async def effect(step: int = step) -> dict[str, int]:
                self.calls.append(f"{ctx.run_id}:{step}")
                return {"step": step}

            result = await ctx.effect(f"step-{step}", effect)
            assert result == {"step": step}
            mid = ctx.new_id("msg")
            await ctx.emit({"type": "TEXT_MESSAGE_START", "messageId": mid, "role": "assistant"})
            await ctx.emit({"type": "TEXT_MESSAGE_CONTENT", "messageId": mid,
                            "delta": f"step {step}"})
            await ctx.emit({"type": "TEXT_MESSAGE_END", "messageId": mid})
            await ctx.boundary()
        if props.get("wait"):
            await self.gate.wait()
        if props.get("fail"):
            raise AgentError("told to fail", code="told")
        return {"steps": props.get("steps", 2)}


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[Engine]:
    agents: dict[str, Agent] = {"steps": Steps(), "scripted": ScriptedAgent()}
    e = Engine(Settings(data_dir=tmp_path, lease_ttl=5.0), SQLiteStore(tmp_path / "o.db"),
               agents)
    await e.start()
    try:
        yield e
    finally:
        await e.stop()


def body(thread_id: str, run_id: str, **props: Any) -> dict[str, Any]:
    return {"threadId": thread_id, "runId": run_id, "protocolVersion": "1.0",
            "messages": [{"id": f"u-{run_id}", "role": "user", "content": "go"}],
            "state": {}, "tools": [], "context": [], "forwardedProps": props}


async def final(engine: Engine, run: RunRecord) -> RunRecord:
    for _ in range(400):
        current = await engine.store.get_run_by_rid(run.rid)
        assert current is not None
        if current.status in FINAL:
            return current
        await asyncio.sleep(0.025)
    raise AssertionError("the run did not end")


async def log(engine: Engine, run: RunRecord) -> list[dict[str, Any]]:
    return [json.loads(e.body) for e in await engine.store.read_events(run.rid, 0, 10_000)]


async def test_an_execution_runs_the_agent_and_ends_the_run(engine: Engine) -> None:
    admitted = await engine.admit("alice", "steps", body("t1", "r1", steps=3), RunOptions())
    run = await final(engine, admitted.run)
    assert run.status == "succeeded" and run.outcome == {"type": "success",
                                                         "result": {"steps": 3}}
    events = await log(engine, run)
    assert events[0]["type"] == "RUN_STARTED" and events[-1]["type"] == "RUN_FINISHED"
    assert events[-1]["result"] == {"steps": 3}
    assert [e.seq for e in await engine.store.read_events(run.rid, 0, 100)] == \
        list(range(1, len(events) + 1))
    agent = engine.agents["steps"]
    assert isinstance(agent, Steps) and agent.calls == ["r1:0", "r1:1", "r1:2"]
    assert not any(engine.resident().values())


async def test_an_agent_error_fails_the_run_with_its_code(engine: Engine) -> None:
    admitted = await engine.admit("alice", "steps", body("t2", "r2", fail=True), RunOptions())
    run = await final(engine, admitted.run)
    assert run.status == "failed" and run.error == {"code": "told", "message": "told to fail"}
    last = (await log(engine, run))[-1]
    assert last["type"] == "RUN_ERROR" and last["code"] == "told"


async def test_cancel_reaches_a_waiting_agent_and_keeps_the_boundary(engine: Engine) -> None:
    admitted = await engine.admit("alice", "steps", body("t3", "r3", wait=True), RunOptions())
    for _ in range(400):  # until the agent waits at its gate, both steps written
        if sum(e["type"] == "TEXT_MESSAGE_END" for e in await log(engine, admitted.run)) == 2:
            break
        await asyncio.sleep(0.025)
    run = await engine.cancel("alice", "r3", wait=True, limit=10)
    assert run.status == "cancelled"
    events = await log(engine, admitted.run)
    assert events[-1]["outcome"] == {"type": "cancelled"}
    view = await engine.store.thread_view("alice", "t3")
    assert view is not None and len(view.snapshot.messages) == 3  # the input and both steps


async def test_effects_are_journaled_once_per_key(engine: Engine) -> None:
    admitted = await engine.admit("alice", "steps", body("t4", "r4", steps=2), RunOptions())
    run = await final(engine, admitted.run)
    record = await engine.store.effect_get(run.rid, "step-1")
    assert record is not None and record.status == "completed" and record.result == {"step": 1}


async def test_admission_commits_the_runs_first_event_before_it_returns(
        engine: Engine) -> None:
    """A run started at admission has RUN_STARTED (and the snapshot with its input)
    committed by the time admit returns: the request's stream starts from the log.
    Admitted right after start, while the pump's first claim holds all the room: the
    admission waits for that claim instead of queueing its run behind the next one."""
    admitted = await engine.admit("alice", "steps", body("t5", "r5", steps=0, wait=True),
                                  RunOptions())
    assert admitted.run.status == "running" and admitted.run.last_seq == 1
    [started] = await log(engine, admitted.run)  # the agent emits nothing before its gate
    assert started["type"] == "RUN_STARTED"
    assert [m["id"] for m in started["input"]["messages"]] == ["u-r5"]
    view = await engine.store.thread_view("alice", "t5")
    assert view is not None and [m["id"] for m in view.snapshot.messages] == ["u-r5"]
    agent = engine.agents["steps"]
    assert isinstance(agent, Steps)
    agent.gate.set()
    run = await final(engine, admitted.run)
    assert [e["type"] for e in await log(engine, run)] == ["RUN_STARTED", "RUN_FINISHED"]


async def test_a_run_claimed_without_a_start_gets_run_started_from_its_execution(
        tmp_path: Path) -> None:
    """A running run with nothing logged (claimed before claims started runs, by a
    process that died) is taken over and started by the execution, not resumed."""
    engine = Engine(Settings(data_dir=tmp_path, lease_ttl=5.0, crash_policy="resume"),
                    SQLiteStore(tmp_path / "o.db"), {"steps": Steps()})
    await engine.start()
    try:
        await engine.store.admit(AdmitRequest(
            principal="alice", thread_id="t6", run_id="r6", agent="steps", key="r6",
            fingerprint="f", input_json=json.dumps(body("t6", "r6", steps=1)),
            options_json="{}", multitask="reject", resume=[], has_new_input=True,
            title=None, now=time.time(), claim_instance="gone", claim_ttl=-60.0,
            claim_limit=1))
        engine.wake()  # the pump takes the expired lease over
        run = await final(engine, await engine.run("alice", "r6"))
        events = await log(engine, run)
        view = await engine.store.thread_view("alice", "t6")
    finally:
        await engine.stop()
    assert run.status == "succeeded" and run.attempts == 2
    assert [e["type"] for e in events].count("RUN_STARTED") == 1
    assert events[0]["type"] == "RUN_STARTED"
    assert [m["id"] for m in events[0]["input"]["messages"]] == ["u-r6"]
    assert not any(e.get("name") == "outlast.resumed" for e in events)
    assert view is not None and view.snapshot.messages[0]["id"] == "u-r6"


async def test_the_writer_publishes_only_what_it_committed(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "w.db")
    await store.open()
    hub = Hub()
    committed: list[RunWrite] = []
    writer = Writer(store, hub, committed.extend)
    writer.start()
    engine = Engine(Settings(data_dir=tmp_path), store, {"steps": Steps()})
    try:
        admitted = await engine.store.admit(_admit_request(engine, "tw", "rw"))
        claimed = await store.claim_queued("me", 5.0, 10)
        assert [r.rid for r in claimed] == [admitted.run.rid]
        run = claimed[0]
        channel = writer.channel(run.rid, run.tid, run.id, run.attempts, "me", 0)
        with hub.watch(run.rid) as feed:
            for seq in range(1, 6):
                writer.append(channel, seq, False, json.dumps({"type": "CUSTOM", "name": "n",
                                                              "value": seq}))
            assert feed.last_seq == 0  # queued, not committed: nobody sees it (G2)
            await writer.flush(channel)
            assert feed.last_seq == 5 and [e.seq for e in feed.cached_after(0, 10) or []] == \
                [1, 2, 3, 4, 5]
            assert [e.seq for e in await store.read_events(run.rid, 0, 10)] == [1, 2, 3, 4, 5]
            assert sum(len(w.events) for w in committed) == 5
            # A channel of an attempt that lost its lease is fenced: nothing more is written.
            stale = writer.channel(run.rid, run.tid, run.id, run.attempts + 7, "other", 5)
            fenced: list[bool] = []
            stale.on_fenced = lambda: fenced.append(True)
            writer.append(stale, 6, False, json.dumps({"type": "CUSTOM", "name": "n",
                                                      "value": 6}))
            await writer.flush(stale)
            assert stale.fenced and fenced == [True] and feed.last_seq == 5
            assert len(await store.read_events(run.rid, 0, 10)) == 5
        assert writer.pending_channels() == 0 and len(hub) == 0
    finally:
        await writer.stop()
        await store.close()


async def test_a_runs_backlog_is_its_share_of_one_budget_and_waits_for_the_take(
        tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "b.db")
    await store.open()
    hub = Hub()
    writer = Writer(store, hub, lambda writes: None)  # not started: nothing is taken yet
    engine = Engine(Settings(data_dir=tmp_path), store, {"steps": Steps()})
    try:
        for n in ("ra", "rb"):
            await store.admit(_admit_request(engine, f"t{n}", n))
        a, b = await store.claim_queued("me", 5.0, 10)
        ca = writer.channel(a.rid, a.tid, a.id, a.attempts, "me", 0)
        cb = writer.channel(b.rid, b.tid, b.id, b.attempts, "me", 0)
        assert writer.high_water() == BACKLOG  # nobody writing: one run may hold it all
        writer.append(cb, 1, False, json.dumps({"type": "CUSTOM", "name": "n", "value": 0}))
        assert writer.high_water() == max(MIN_BACKLOG, BACKLOG // 1)
        for seq in range(1, BACKLOG + 2):
            writer.append(ca, seq, False, json.dumps({"type": "CUSTOM", "name": "n",
                                                      "value": seq}))
        assert writer.high_water() == max(MIN_BACKLOG, BACKLOG // 2)  # two runs share it
        assert writer.over_high_water(ca) and not writer.over_high_water(cb)
        room = asyncio.create_task(writer.make_room(ca))
        await asyncio.sleep(0.05)
        assert not room.done()  # over its share, and the writer has taken nothing
        writer.start()
        await asyncio.wait_for(room, 10.0)  # the writer took the backlog into a commit
        await writer.flush(ca)
        await writer.flush(cb)
        assert not ca.fenced and not cb.fenced, (ca.fenced, cb.fenced)
        assert len(await store.read_events(a.rid, 0, 10_000)) == BACKLOG + 1
        assert [e.seq for e in await store.read_events(b.rid, 0, 10)] == [1]
    finally:
        await writer.stop()
        await store.close()


async def test_a_transaction_body_run_in_a_thread_may_await_only_its_connection(
        tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "i.db")
    await store.open()
    engine = Engine(Settings(data_dir=tmp_path), store, {"steps": Steps()})
    try:
        async def suspends(c: Any) -> None:
            await c.run("thread_insert", principal="alice", id="tx", title=None, now=1.0)
            await asyncio.sleep(0)  # not the connection: refused, and nothing is kept

        with pytest.raises(RuntimeError, match="awaited something other than its connection"):
            await store._in_write(suspends)
        assert await store.get_thread("alice", "tx") is None
        # The connection is back in order: the next transaction commits.
        await store.admit(_admit_request(engine, "tx", "rx"))
        assert await store.get_thread("alice", "tx") is not None
    finally:
        await store.close()


async def test_a_cancelled_reader_returns_at_once_and_its_connection_waits_for_the_thread(
        tmp_path: Path) -> None:
    """A client that leaves mid-read must not hold its stream up until the read ends (a
    reattach storm would queue behind streams nobody reads), nor hand back a connection
    its thread still uses."""
    store = SQLiteStore(tmp_path / "c.db", readers=1)
    await store.open()
    slow = ("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n "
            "WHERE i < 10000000) SELECT count(*) FROM n")
    started = asyncio.Event()

    async def long_read(c: Any) -> int:
        rows = c._db.execute(slow).fetchall()  # runs in the reader's thread
        return int(rows[0][0])

    try:
        reader = asyncio.create_task(store._in_read(long_read))
        loop = asyncio.get_running_loop()
        loop.call_later(0.05, started.set)
        await started.wait()
        reader.cancel()
        with pytest.raises(asyncio.CancelledError):
            await reader
        # The caller is gone; the thread still reads on the only connection, so it is
        # not back in the pool, and the next read waits for it rather than sharing it.
        assert store._inline_readers.qsize() == 0
        assert await store.get_thread("alice", "nobody") is None
        assert store._inline_readers.qsize() == 1
    finally:
        await store.close()


def _admit_request(engine: Engine, thread_id: str, run_id: str) -> Any:
    import time

    from outlast.engine.admission import fingerprint
    from outlast.protocol.jsonutil import dumps
    from outlast.store.base import AdmitRequest

    b = body(thread_id, run_id)
    return AdmitRequest(principal="alice", thread_id=thread_id, run_id=run_id, agent="steps",
                        key=run_id, fingerprint=fingerprint("steps", b), input_json=dumps(b),
                        options_json="{}", multitask="reject", resume=[], has_new_input=True,
                        title=None, now=time.time())


async def test_the_engine_hands_freed_memory_back_every_so_often(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = malloc_trim()
    assert real is not None, "this machine's C library is glibc: malloc_trim must be found"
    calls: list[int] = []

    def trim(pad: int) -> int:
        calls.append(pad)
        return real(pad)

    monkeypatch.setattr(runtime, "malloc_trim", lambda: trim)
    monkeypatch.setattr(trim_module, "TRIM_SECONDS", 0.05)
    engine = Engine(Settings(data_dir=tmp_path), SQLiteStore(tmp_path / "o.db"),
                    {"steps": Steps()})
    await engine.start()
    try:
        for _ in range(100):
            if len(calls) >= 2:
                break
            await asyncio.sleep(0.05)
        assert calls[:2] == [0, 0]
    finally:
        await engine.stop()
    assert not [t for t in asyncio.all_tasks() if t.get_name() == "outlast-trim"]
