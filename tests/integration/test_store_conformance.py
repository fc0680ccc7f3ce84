"""The store interface, run unchanged against every backend (SQLite and PostgreSQL).

``store`` is an opened store on a fresh file or database. ``peer`` is a second
handle on the same data, as a second server process would hold it: for
PostgreSQL a second pool and LISTEN connection on the same database; for
SQLite, whose directory lock allows one process, the same handle. Tests that
race use both, so on PostgreSQL the database alone has to keep the rules.
"""

from __future__ import annotations

import asyncio
import base64
import json
import sys
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from outlast.errors import (
    HistoryDiverged,
    IdempotencyConflict,
    InterruptExpired,
    InterruptNotPending,
    InvalidRequest,
    LeaseLost,
    ResumeIncomplete,
    RunAlreadyActive,
    RunIdConflict,
    ThreadBusy,
    ThreadNotFound,
)
from outlast.store.base import (
    AdmitRequest,
    FinishWrite,
    Multitask,
    ResumeAnswer,
    RunRecord,
    RunWrite,
    SnapshotWrite,
    ThreadPage,
)
from outlast.store.notifications import (
    CancelRequested,
    EventsCommitted,
    Notification,
    WorkAvailable,
)
from outlast.store.postgres import PostgresStore
from outlast.store.sql import migrations
from outlast.store.sqlite import SQLiteStore
from outlast.store.sqlstore import SqlStore

PRINCIPAL = "alice"
TTL = 30.0


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    if request.param == "sqlite":
        return "sqlite", str(tmp_path / "outlast.db")
    return "postgres", request.getfixturevalue("pg_url")


def open_store(backend: tuple[str, str]) -> SqlStore:
    kind, where = backend
    if kind == "sqlite":
        return SQLiteStore(where)
    return PostgresStore(where, min_size=1, max_size=20)


@pytest.fixture
async def store(backend: tuple[str, str]) -> AsyncIterator[SqlStore]:
    s = open_store(backend)
    await s.open()
    try:
        yield s
    finally:
        await s.close()


@pytest.fixture
async def peer(backend: tuple[str, str], store: SqlStore) -> AsyncIterator[SqlStore]:
    if backend[0] == "sqlite":
        yield store
        return
    s = open_store(backend)
    await s.open()
    try:
        yield s
    finally:
        await s.close()


# -- helpers ----------------------------------------------------------------


def request(thread: str = "t1", run: str = "r1", *, key: str | None = None,
            body: str = "hello", multitask: Multitask = "reject",
            resume: list[ResumeAnswer] | None = None, new_input: bool = True,
            principal: str = PRINCIPAL, now: float | None = None) -> AdmitRequest:
    payload = {"threadId": thread, "runId": run, "text": body}
    return AdmitRequest(
        principal=principal, thread_id=thread, run_id=run, agent="demo", key=key or run,
        fingerprint=f"fp:{thread}:{run}:{body}", input_json=json.dumps(payload),
        options_json=json.dumps({"multitask": multitask}), multitask=multitask,
        resume=resume or [], has_new_input=new_input, title=f"title {thread}",
        now=time.time() if now is None else now,
    )


async def admit_running(store: SqlStore, thread: str = "t1", run: str = "r1",
                        instance: str = "A") -> RunRecord:
    """Admit a run and lease it to ``instance``."""
    result = await store.admit(request(thread, run))
    claimed = await store.claim_queued(instance, TTL, 100)
    assert result.run.rid in {r.rid for r in claimed}
    return next(r for r in claimed if r.rid == result.run.rid)


def events_for(run: RunRecord, start: int, n: int, boundary_every: int = 0
               ) -> list[tuple[int, bool, str]]:
    return [
        (seq, bool(boundary_every) and seq % boundary_every == 0,
         json.dumps({"type": "CUSTOM", "name": "n", "value": seq, "runId": run.id}))
        for seq in range(start, start + n)
    ]



async def append(store: SqlStore, run: RunRecord, n: int, *, instance: str = "A",
                 prev: int | None = None, attempt: int | None = None,
                 boundary_every: int = 0) -> set[int]:
    prev_seq = run.last_seq if prev is None else prev
    return await store.write([RunWrite(
        rid=run.rid, tid=run.tid, run_id=run.id,
        attempt=run.attempts if attempt is None else attempt, instance=instance,
        prev_seq=prev_seq, events=events_for(run, prev_seq + 1, n, boundary_every),
    )])


async def finish(store: SqlStore, run: RunRecord, status: str = "succeeded", *,
                 instance: str = "A", interrupts: list[tuple[str, str, float | None]]
                 | None = None) -> RunRecord:
    current = await store.get_run_by_rid(run.rid)
    assert current is not None
    fenced = await store.write([RunWrite(
        rid=run.rid, tid=run.tid, run_id=run.id, attempt=current.attempts, instance=instance,
        prev_seq=current.last_seq,
        events=[(current.last_seq + 1, True, '{"type":"RUN_FINISHED"}')],
        finish=FinishWrite(status, outcome={"type": "success"} if status == "succeeded"
                           else None, interrupts=interrupts or []),
    )])
    assert not fenced
    done = await store.get_run_by_rid(run.rid)
    assert done is not None
    return done


def interrupt(iid: str, expires: float | None = None) -> tuple[str, str, float | None]:
    return iid, json.dumps({"id": iid, "reason": "tool_call"}), expires


# -- admission ----------------------------------------------------------------


async def test_admission_creates_a_queued_run_on_a_new_busy_thread(store: SqlStore) -> None:
    result = await store.admit(request())
    assert result.created and not result.superseded
    run = result.run
    assert (run.status, run.id, run.thread_id, run.agent) == ("queued", "r1", "t1", "demo")
    assert run.attempts == 0 and run.last_seq == 0 and not run.cancel_requested
    assert run.input == {"threadId": "t1", "runId": "r1", "text": "hello"}
    thread = await store.get_thread(PRINCIPAL, "t1")
    assert thread is not None and thread.status == "busy" and thread.title == "title t1"
    assert thread.tid == run.tid
    assert await store.get_thread("mallory", "t1") is None
    # Every read of a run but a claim's leaves its input out (it may be megabytes).
    assert (await store.get_run(PRINCIPAL, "r1")) == run.without_input()
    assert await store.get_run("mallory", "r1") is None
    assert (await store.get_run_by_rid(run.rid)) == run.without_input()
    assert [r.id for r in await store.active_runs(run.tid)] == ["r1"]
    assert [r.id for r in await store.list_runs(run.tid, 10, None)] == ["r1"]


async def test_the_same_key_and_body_attaches_to_the_run(store: SqlStore) -> None:
    first = await store.admit(request(key="k1"))
    again = await store.admit(request(key="k1"))
    assert not again.created and again.run.rid == first.run.rid
    assert len(await store.list_runs(first.run.tid, 10, None)) == 1


async def test_the_same_key_with_another_body_is_refused(store: SqlStore) -> None:
    await store.admit(request(key="k1"))
    with pytest.raises(IdempotencyConflict) as err:
        await store.admit(request(key="k1", body="changed"))
    assert err.value.fields["key"] == "k1"


async def test_a_run_id_used_by_another_request_is_refused(store: SqlStore) -> None:
    await store.admit(request("t1", "r1", key="k1"))
    with pytest.raises(RunIdConflict) as err:
        await store.admit(request("t2", "r1", key="k2"))
    assert err.value.fields["runId"] == "r1"
    # Nothing of the refused request stays behind.
    assert await store.get_thread(PRINCIPAL, "t2") is None


async def test_a_busy_thread_rejects_another_request(store: SqlStore) -> None:
    await store.admit(request("t1", "r1"))
    with pytest.raises(RunAlreadyActive) as err:
        await store.admit(request("t1", "r2"))
    assert err.value.fields["activeRunId"] == "r1"
    assert await store.get_run(PRINCIPAL, "r2") is None


async def test_enqueue_admits_a_queued_run_behind_the_active_one(store: SqlStore) -> None:
    first = await store.admit(request("t1", "r1"))
    second = await store.admit(request("t1", "r2", multitask="enqueue"))
    assert second.created and second.run.status == "queued"
    assert [r.id for r in await store.active_runs(first.run.tid)] == ["r1", "r2"]


async def test_multitask_interrupt_marks_the_active_run_for_cancel(store: SqlStore) -> None:
    running = await admit_running(store, "t1", "r1")
    result = await store.admit(request("t1", "r2", multitask="interrupt"))
    assert result.created and [r.id for r in result.superseded] == ["r1"]
    old = await store.get_run_by_rid(running.rid)
    assert old is not None and old.cancel_requested and old.status == "running"


async def test_concurrent_identical_admissions_make_one_run(
        store: SqlStore, peer: SqlStore) -> None:
    handles = [store, peer] * 8
    results = await asyncio.gather(*(h.admit(request("t1", "r1")) for h in handles))
    assert sum(r.created for r in results) == 1
    assert len({r.run.rid for r in results}) == 1
    assert len(await store.list_runs(results[0].run.tid, 10, None)) == 1


async def test_concurrent_different_requests_on_one_thread_admit_one(
        store: SqlStore, peer: SqlStore) -> None:
    handles = [store, peer] * 6

    async def attempt(i: int) -> str:
        try:
            await handles[i].admit(request("t1", f"r{i}"))
        except RunAlreadyActive:
            return "rejected"
        return "admitted"

    outcomes = await asyncio.gather(*(attempt(i) for i in range(len(handles))))
    assert sorted(outcomes).count("admitted") == 1
    thread = await store.get_thread(PRINCIPAL, "t1")
    assert thread is not None
    assert len(await store.active_runs(thread.tid)) == 1


# -- interrupts -----------------------------------------------------------------


async def test_pending_interrupts_are_answered_exactly_once(store: SqlStore) -> None:
    run = await admit_running(store, "t1", "r1")
    done = await finish(store, run, "interrupted",
                        interrupts=[interrupt("i-b"), interrupt("i-a")])
    assert done.status == "interrupted"
    thread = await store.get_thread(PRINCIPAL, "t1")
    assert thread is not None and thread.status == "interrupted"
    pending = await store.interrupts(tid=run.tid, pending=True)
    assert [i.id for i in pending] == ["i-b", "i-a"]  # in the order raised
    assert [i.id for i in await store.interrupts(rid=run.rid)] == ["i-b", "i-a"]
    assert pending[0].run_id == "r1" and pending[0].body["reason"] == "tool_call"

    with pytest.raises(ResumeIncomplete) as err:
        await store.admit(request("t1", "r2"))
    assert err.value.fields["missing"] == ["i-b", "i-a"]
    with pytest.raises(ResumeIncomplete):
        await store.admit(request("t1", "r2", resume=[ResumeAnswer("i-a", "resolved")]))
    with pytest.raises(InterruptNotPending):
        await store.admit(request("t1", "r2", resume=[
            ResumeAnswer("i-a", "resolved"), ResumeAnswer("i-b", "resolved"),
            ResumeAnswer("nope", "resolved")]))

    cont = await store.admit(request("t1", "r2", new_input=False, resume=[
        ResumeAnswer("i-a", "resolved", {"approved": True}),
        ResumeAnswer("i-b", "cancelled")]))
    assert cont.created
    answered = {i.id: i for i in await store.resolved_by(cont.run.rid)}
    assert set(answered) == {"i-a", "i-b"}
    assert answered["i-a"].status == "resolved" and answered["i-b"].status == "cancelled"
    assert answered["i-a"].resolution == {"status": "resolved", "payload": {"approved": True}}
    assert answered["i-a"].answered_by == PRINCIPAL
    assert answered["i-a"].continuation_rid == cont.run.rid
    assert await store.interrupts(tid=run.tid, pending=True) == []
    # Without the flag: every interrupt of the thread, answered ones included.
    everything = await store.interrupts(tid=run.tid)
    assert [(i.id, i.status) for i in everything] == [("i-b", "cancelled"),
                                                       ("i-a", "resolved")]

    # Single use: a second answer (another request) finds nothing pending.
    with pytest.raises(InterruptNotPending):
        await store.admit(request("t1", "r3", multitask="enqueue", new_input=False,
                                  resume=[ResumeAnswer("i-a", "resolved")]))


async def test_an_expired_interrupt_can_only_be_cancelled(store: SqlStore) -> None:
    run = await admit_running(store, "t1", "r1")
    await finish(store, run, "interrupted", interrupts=[interrupt("i-1", time.time() - 5)])
    with pytest.raises(InterruptExpired):
        await store.admit(request("t1", "r2", new_input=False,
                                  resume=[ResumeAnswer("i-1", "resolved")]))
    cont = await store.admit(request("t1", "r2", new_input=False,
                                     resume=[ResumeAnswer("i-1", "cancelled")]))
    assert cont.created


async def test_concurrent_answers_to_one_interrupt_admit_one(
        store: SqlStore, peer: SqlStore) -> None:
    run = await admit_running(store, "t1", "r1")
    await finish(store, run, "interrupted", interrupts=[interrupt("i-1")])
    handles = [store, peer] * 4

    async def answer(i: int) -> str:
        try:
            await handles[i].admit(request("t1", f"c{i}", multitask="enqueue", new_input=False,
                                           resume=[ResumeAnswer("i-1", "resolved")]))
        except InterruptNotPending:
            return "refused"
        return "admitted"

    outcomes = await asyncio.gather(*(answer(i) for i in range(len(handles))))
    assert outcomes.count("admitted") == 1


# -- leases -------------------------------------------------------------------


async def test_claim_queued_starts_the_oldest_run_of_each_thread_only(store: SqlStore) -> None:
    a1 = (await store.admit(request("ta", "a1"))).run
    a2 = (await store.admit(request("ta", "a2", multitask="enqueue"))).run
    b1 = (await store.admit(request("tb", "b1"))).run
    claimed = await store.claim_queued("A", TTL, 10)
    assert [r.id for r in claimed] == ["a1", "b1"]
    assert all(r.status == "running" and r.lease_holder == "A" and r.attempts == 1
               and r.started_at is not None for r in claimed)
    assert await store.claim_queued("B", TTL, 10) == []  # one running run per thread
    await finish(store, a1)
    assert [r.id for r in await store.claim_queued("B", TTL, 10)] == ["a2"]
    assert (await store.get_run_by_rid(b1.rid)).lease_holder == "A"  # type: ignore[union-attr]
    assert a2.rid > a1.rid


async def test_admission_can_start_the_run_it_creates_in_the_same_transaction(
        store: SqlStore) -> None:
    claim = {"claim_instance": "A", "claim_ttl": TTL, "claim_limit": 1}
    first = await store.admit(replace(request("ta", "a1"), **claim))
    assert first.created and [r.id for r in first.claimed] == ["a1"]
    assert first.run.status == "running" and first.run.lease_holder == "A"
    assert first.run.attempts == 1
    # The thread's next run must wait for it: admission claims only what claim_queued
    # would (the oldest queued run of a thread with none running).
    second = await store.admit(replace(request("ta", "a2", multitask="enqueue"), **claim))
    assert second.created and second.claimed == [] and second.run.status == "queued"
    # No room: created and queued, nothing leased.
    third = await store.admit(replace(request("tb", "b1"), claim_instance="A",
                                      claim_ttl=TTL, claim_limit=0))
    assert third.claimed == [] and third.run.status == "queued"
    # A retry attaches and claims nothing, whatever room it offers.
    again = await store.admit(replace(request("tb", "b1"), **claim))
    assert not again.created and again.claimed == [] and again.run.status == "queued"
    assert [r.id for r in await store.claim_queued("B", TTL, 10)] == ["b1"]
    thread = await store.get_thread(PRINCIPAL, "ta")
    assert thread is not None and thread.status == "busy"


def with_messages(req: AdmitRequest, *messages: dict[str, Any]) -> AdmitRequest:
    body = {"threadId": req.thread_id, "runId": req.run_id, "messages": list(messages)}
    return replace(req, input_json=json.dumps(body), has_new_input=bool(messages))


async def test_a_claim_that_starts_commits_run_started_and_the_snapshot_with_it(
        store: SqlStore) -> None:
    """claim_queued(start=True) and admission with claim_start commit each run's
    RUN_STARTED as seq 1, echoing only the input's messages the thread does not hold,
    with the thread's snapshot as of it (those messages after the thread's last)."""
    hello = {"id": "u1", "role": "user", "content": "hello", "subagentRunId": None}
    first = await store.admit(replace(
        with_messages(request("ta", "a1"), hello),
        claim_instance="A", claim_ttl=TTL, claim_limit=1, claim_start=True))
    [run] = first.claimed
    assert run.last_seq == 1 and first.run.last_seq == 1
    [event] = await store.read_events(run.rid, 0, 10)
    started = json.loads(event.body)
    assert (event.seq, event.boundary) == (1, True)
    assert {k: v for k, v in started.items() if k != "timestamp"} == {
        "type": "RUN_STARTED", "threadId": "ta", "runId": "a1", "protocolVersion": "1.0",
        "input": {"threadId": "ta", "runId": "a1", "messages": [hello]}}
    assert isinstance(started["timestamp"], int)
    snap = await store.get_snapshot(run.tid)
    assert (snap.as_of_run, snap.as_of_seq) == ("a1", 1)
    assert snap.messages == [{"id": "u1", "role": "user", "content": "hello"}]  # as folded
    assert snap.positions == {"u1": 1.0}
    # The claim holds the lease as of seq 1: a write that starts at seq 1 is fenced off.
    assert await append(store, run, 1, prev=0) == {run.rid}
    await finish(store, run)

    # The next run resends the history: only what is new is echoed, placed last.
    answer = {"id": "u2", "role": "user", "content": "more"}
    queued = (await store.admit(with_messages(request("ta", "a2"), hello, answer, answer))).run
    plain = (await store.admit(with_messages(request("tb", "b1"), answer))).run
    assert queued.last_seq == 0
    [second] = await store.claim_queued("A", TTL, 1, start=True)
    assert second.rid == queued.rid and second.last_seq == 1
    [event] = await store.read_events(second.rid, 0, 10)
    assert json.loads(event.body)["input"]["messages"] == [answer]
    snap = await store.get_snapshot(second.tid)
    assert [m["id"] for m in snap.messages] == ["u1", "u2"] and snap.positions["u2"] > 1.0
    assert (snap.as_of_run, snap.as_of_seq) == ("a2", 1)
    # Without start, a claim leaves the log to its caller.
    [bare] = await store.claim_queued("A", TTL, 1)
    assert bare.rid == plain.rid and bare.last_seq == 0
    assert await store.read_events(bare.rid, 0, 10) == []
    assert (await store.get_snapshot(bare.tid)).messages == []


async def test_admission_starts_its_run_from_what_it_read_of_the_input_and_thread(
        store: SqlStore) -> None:
    """As the engine admits: with the input parsed and the resent ids checked against
    the thread (``StartInput``), the claim in admission's transaction starts the run
    from those, not from reading them again, and echoes the same: only what is new."""
    checked: list[list[str]] = []

    def as_the_engine_admits(req: AdmitRequest) -> AdmitRequest:
        body = json.loads(req.input_json)
        return replace(req, input=body, resent=[m["id"] for m in body["messages"]],
                       check_history=lambda stored: checked.append(sorted(i for i, _ in stored)),
                       claim_instance="A", claim_ttl=TTL, claim_limit=1, claim_start=True)

    hello = {"id": "u1", "role": "user", "content": "hello"}
    answer = {"id": "a1", "role": "assistant", "content": "hi"}
    more = {"id": "u2", "role": "user", "content": "more"}
    [first] = (await store.admit(as_the_engine_admits(
        with_messages(request("te", "e1"), hello, answer)))).claimed
    [event] = await store.read_events(first.rid, 0, 10)
    assert json.loads(event.body)["input"]["messages"] == [hello, answer]
    await finish(store, first)
    [second] = (await store.admit(as_the_engine_admits(
        with_messages(request("te", "e2"), hello, answer, more, more)))).claimed
    assert checked == [[], ["a1", "u1"]] and second.last_seq == 1
    [event] = await store.read_events(second.rid, 0, 10)
    assert json.loads(event.body)["input"]["messages"] == [more]
    snap = await store.get_snapshot(second.tid)
    assert [m["id"] for m in snap.messages] == ["u1", "a1", "u2"]
    assert snap.positions == {"u1": 1.0, "a1": 2.0, "u2": 3.0}
    # The claim's record still carries the stored input, for the execution to read.
    assert second.input == json.loads(with_messages(request("te", "e2"), hello, answer,
                                                    more, more).input_json)


async def test_a_claim_starts_only_a_run_that_will_be_at_a_boundary(store: SqlStore) -> None:
    """A tool call awaiting its result (one the input carries, or one an interrupted
    run left) means RUN_STARTED is no boundary: such a run is claimed, not started."""
    call = {"id": "a1", "role": "assistant", "content": "",
            "toolCalls": [{"id": "c1", "type": "function",
                           "function": {"name": "f", "arguments": "{}"}}]}
    result = {"id": "t1", "role": "tool", "toolCallId": "c1", "content": "ok"}
    asked = {"id": "u1", "role": "user", "content": "hi"}
    await store.admit(with_messages(request("open", "o1"), asked, call))
    await store.admit(with_messages(request("done", "d1"), asked, call, result))
    await store.admit(with_messages(request("held", "h1"), asked))
    claimed = {r.id: r for r in await store.claim_queued("A", TTL, 10, start=True)}
    assert (claimed["o1"].last_seq, claimed["d1"].last_seq, claimed["h1"].last_seq) == \
        (0, 1, 1)
    assert await store.read_events(claimed["o1"].rid, 0, 10) == []
    # An interrupted end leaves its thread unsettled for the continuation that follows.
    await finish(store, claimed["h1"], "interrupted", interrupts=[interrupt("i1")])
    resumed = (await store.admit(request(
        "held", "h2", resume=[ResumeAnswer("i1", "resolved", None)], new_input=False))).run
    [after] = await store.claim_queued("A", TTL, 10, start=True)
    assert after.rid == resumed.rid and after.last_seq == 0
    # A succeeded end at a boundary settles it: the next run starts with its claim.
    await finish(store, claimed["d1"])
    await store.admit(with_messages(request("done", "d2"), {**asked, "id": "u2"}))
    [next_run] = await store.claim_queued("A", TTL, 10, start=True)
    assert next_run.id == "d2" and next_run.last_seq == 1


async def test_claim_queued_respects_the_limit(store: SqlStore) -> None:
    for i in range(3):
        await store.admit(request(f"t{i}", f"r{i}"))
    assert [r.id for r in await store.claim_queued("A", TTL, 2)] == ["r0", "r1"]
    assert [r.id for r in await store.claim_queued("A", TTL, 2)] == ["r2"]


async def test_concurrent_claims_lease_each_run_once(store: SqlStore, peer: SqlStore) -> None:
    for i in range(12):
        await store.admit(request(f"t{i}", f"r{i}"))
    batches = await asyncio.gather(*(
        (store if i % 2 else peer).claim_queued(f"I{i}", TTL, 3) for i in range(8)))
    claimed = [r.rid for batch in batches for r in batch]
    assert len(claimed) == 12 and len(set(claimed)) == 12


async def test_expired_leases_are_taken_over_once(store: SqlStore, peer: SqlStore) -> None:
    run = (await store.admit(request())).run
    [claimed] = await store.claim_queued("A", -60.0, 10)  # expired, past the margin
    assert await store.claim_expired("B", TTL, 10, all_foreign=False) != []
    taken = await store.get_run_by_rid(run.rid)
    assert taken is not None and taken.lease_holder == "B" and taken.attempts == 2
    assert claimed.attempts == 1
    # B's lease is fresh: nobody takes it over without all_foreign.
    assert await peer.claim_expired("C", TTL, 10) == []
    # all_foreign: every run leased by another instance (the SQLite start-up path).
    again = await peer.claim_expired("C", TTL, 10, all_foreign=True)
    assert [r.rid for r in again] == [run.rid] and again[0].attempts == 3


async def test_concurrent_takeovers_claim_an_expired_run_once(
        store: SqlStore, peer: SqlStore) -> None:
    for i in range(6):
        await store.admit(request(f"t{i}", f"r{i}"))
    await store.claim_queued("dead", -60.0, 10)  # expired, past the takeover margin
    batches = await asyncio.gather(*(
        (store if i % 2 else peer).claim_expired(f"I{i}", TTL, 10) for i in range(6)))
    claimed = [r.rid for batch in batches for r in batch]
    assert len(claimed) == 6 and len(set(claimed)) == 6


async def test_renew_and_release_leases(store: SqlStore) -> None:
    run = await admit_running(store, "t1", "r1", instance="A")
    other = await admit_running(store, "t2", "r2", instance="B")
    held = await store.renew_leases("A", TTL)
    assert [(s.rid, s.attempt, s.cancel_requested) for s in held] == [(run.rid, 1, False)]
    await store.request_cancel(run.rid)
    [state] = await store.renew_leases("A", TTL)
    assert state.cancel_requested
    await store.release_lease(run.rid, "A", attempt=2)  # wrong attempt: no effect
    assert (await store.get_run_by_rid(run.rid)).lease_holder == "A"  # type: ignore[union-attr]
    await store.release_lease(run.rid, "A", attempt=1)
    released = await store.get_run_by_rid(run.rid)
    assert released is not None and released.lease_holder is None and released.attempts == 0
    assert released.status == "running"
    assert await store.renew_leases("A", TTL) == []
    # A released run is taken over at once, without waiting for a TTL.
    assert [r.rid for r in await store.claim_expired("C", TTL, 10)] == [run.rid]
    assert [s.rid for s in await store.renew_leases("B", TTL)] == [other.rid]


async def test_renewal_limited_to_executing_runs_lets_the_others_expire(
        store: SqlStore) -> None:
    kept = await admit_running(store, "t1", "r1", instance="A")
    stranded = await admit_running(store, "t2", "r2", instance="A")
    held = await store.renew_leases("A", TTL, [kept.rid])
    assert [s.rid for s in held] == [kept.rid]
    assert await store.renew_leases("A", TTL, []) == []
    before = await store.get_run_by_rid(stranded.rid)
    assert before is not None and before.lease_expires_at is not None
    renewed = await store.get_run_by_rid(kept.rid)
    assert renewed is not None and renewed.lease_expires_at is not None
    assert renewed.lease_expires_at > before.lease_expires_at


async def test_an_expired_lease_counts_as_an_attempt_and_is_taken_over_at_once(
        store: SqlStore) -> None:
    run = await admit_running(store, instance="A")
    await store.expire_lease(run.rid, "A", attempt=2)  # not this attempt: no effect
    await store.expire_lease(run.rid, "B", attempt=1)  # not the holder: no effect
    assert (await store.get_run_by_rid(run.rid)).lease_holder == "A"  # type: ignore[union-attr]
    await store.expire_lease(run.rid, "A", attempt=1)
    given_up = await store.get_run_by_rid(run.rid)
    assert given_up is not None and given_up.lease_holder is None
    assert given_up.status == "running" and given_up.attempts == 1
    assert await store.renew_leases("A", TTL) == []
    [taken] = await store.claim_expired("A", TTL, 10)
    assert taken.rid == run.rid and taken.attempts == 2 and taken.lease_holder == "A"


# -- writing runs ---------------------------------------------------------------


async def test_write_appends_only_for_the_lease_holder(store: SqlStore) -> None:
    run = await admit_running(store, instance="A")
    assert await append(store, run, 3, instance="B") == {run.rid}  # wrong instance
    assert await append(store, run, 3, attempt=2) == {run.rid}  # wrong attempt
    assert await append(store, run, 3, prev=5) == {run.rid}  # wrong view of last_seq
    assert await store.read_events(run.rid, 0, 100) == []
    assert (await store.get_run_by_rid(run.rid)).last_seq == 0  # type: ignore[union-attr]
    assert await append(store, run, 3) == set()
    stored = await store.read_events(run.rid, 0, 100)
    assert [e.seq for e in stored] == [1, 2, 3]
    assert json.loads(stored[0].body)["value"] == 1
    # After a takeover, the old holder is fenced off and writes nothing.
    await store.release_lease(run.rid, "A", 1)
    [taken] = await store.claim_expired("B", TTL, 10)
    assert await append(store, run, 1, prev=3, attempt=1, instance="A") == {run.rid}
    assert await append(store, taken, 1, instance="B") == set()
    assert [e.seq for e in await store.read_events(run.rid, 0, 100)] == [1, 2, 3, 4]


async def test_one_batch_commits_the_good_writes_and_fences_the_rest(store: SqlStore) -> None:
    good = await admit_running(store, "t1", "r1", instance="A")
    bad = await admit_running(store, "t2", "r2", instance="B")
    fenced = await store.write([
        RunWrite(rid=good.rid, tid=good.tid, run_id=good.id, attempt=1, instance="A",
                 prev_seq=0, events=events_for(good, 1, 2)),
        RunWrite(rid=bad.rid, tid=bad.tid, run_id=bad.id, attempt=1, instance="A",
                 prev_seq=0, events=events_for(bad, 1, 2)),
    ])
    assert fenced == {bad.rid}
    assert len(await store.read_events(good.rid, 0, 10)) == 2
    assert await store.read_events(bad.rid, 0, 10) == []


async def test_a_batch_tells_apart_each_run_it_fences(store: SqlStore) -> None:
    """One commit fences each run by its own reason, a run leased to another instance
    and a run whose writer's view of last_seq is stale, and writes the runs beside them
    that pass, one with events and one with none."""
    good = await admit_running(store, "t1", "r1", instance="A")
    foreign = await admit_running(store, "t2", "r2", instance="B")
    stale = await admit_running(store, "t3", "r3", instance="A")
    quiet = await admit_running(store, "t4", "r4", instance="A")
    assert await append(store, stale, 3) == set()
    assert await append(store, quiet, 2) == set()

    def write(run: RunRecord, prev: int, n: int) -> RunWrite:
        return RunWrite(rid=run.rid, tid=run.tid, run_id=run.id, attempt=1, instance="A",
                        prev_seq=prev, events=events_for(run, prev + 1, n))

    # The stale view (1) would move last_seq to exactly where the row already is (3).
    fenced = await store.write([write(good, 0, 2), write(foreign, 0, 2),
                                write(stale, 1, 2), write(quiet, 2, 0)])
    assert fenced == {foreign.rid, stale.rid}
    assert [e.seq for e in await store.read_events(good.rid, 0, 10)] == [1, 2]
    assert await store.read_events(foreign.rid, 0, 10) == []
    assert [e.seq for e in await store.read_events(stale.rid, 0, 10)] == [1, 2, 3]
    assert [e.seq for e in await store.read_events(quiet.rid, 0, 10)] == [1, 2]
    # Each run's last_seq is where its own writer left it: the next commits line up.
    assert await append(store, good, 1, prev=2) == set()
    assert await append(store, stale, 1, prev=3) == set()
    assert await append(store, quiet, 1, prev=2) == set()
    assert await append(store, foreign, 1, prev=0, instance="B") == set()


async def test_events_page_in_order_and_boundaries_are_found(store: SqlStore) -> None:
    run = await admit_running(store)
    assert await append(store, run, 25, boundary_every=10) == set()
    page1 = await store.read_events(run.rid, 0, 10)
    page2 = await store.read_events(run.rid, 10, 10)
    page3 = await store.read_events(run.rid, 20, 10)
    assert [e.seq for e in page1 + page2 + page3] == list(range(1, 26))
    assert [e.seq for e in page1 + page2 + page3 if e.boundary] == [10, 20]
    assert await store.read_events(run.rid, 25, 10) == []
    assert await store.last_boundary(run.rid, 25) == 20
    assert await store.last_boundary(run.rid, 19) == 10
    assert await store.last_boundary(run.rid, 9) == 0


async def test_the_construct_index_answers_what_is_open_at_any_seq(store: SqlStore) -> None:
    """seq 1 boundary; 2 opens step s; 3 opens text m; 4..6 content; 7 closes m; 8 opens
    text m again (a key reused); 9 closes it and 10 closes s (a boundary); in two commits
    split between 5 and 6, so a close can land in a later commit than its open."""
    run = await admit_running(store)

    def ev(seq: int, boundary: bool = False) -> tuple[int, bool, str]:
        return (seq, boundary, json.dumps({"type": "CUSTOM", "name": "n", "value": seq}))

    step = ('["step",null,"s"]', '{"reopen":{"type":"STEP_STARTED","stepName":"s"},'
            '"close":{"type":"STEP_FINISHED","stepName":"s"},"lane":null,"chunked":false}')
    text = ('["text","m"]', '{"reopen":{"type":"TEXT_MESSAGE_START","messageId":"m"},'
            '"close":{"type":"TEXT_MESSAGE_END","messageId":"m"},"lane":null,"chunked":false}')
    first = RunWrite(rid=run.rid, tid=run.tid, run_id=run.id, attempt=1, instance="A",
                     prev_seq=0, events=[ev(1, True), *(ev(s) for s in range(2, 6))],
                     constructs=[(2, 0, *step), (3, 0, *text)])
    second = RunWrite(rid=run.rid, tid=run.tid, run_id=run.id, attempt=1, instance="A",
                      prev_seq=5, events=[*(ev(s) for s in range(6, 10)), ev(10, True)],
                      constructs=[(7, 0, text[0], None), (8, 0, *text), (9, 0, text[0], None),
                                  (10, 0, step[0], None)])
    assert await store.write([first]) == set()
    assert await store.write([second]) == set()

    def keys(rows: list[tuple[str, str]]) -> list[str]:
        return [json.loads(k)[0] for k, _ in rows]

    expected = {0: [], 1: [], 2: ["step"], 3: ["step", "text"], 5: ["step", "text"],
                6: ["step", "text"], 7: ["step"], 8: ["step", "text"], 9: ["step"], 10: [],
                11: []}
    for after, kinds in expected.items():
        assert keys(await store.open_constructs(run.rid, after)) == kinds, after
    body = (await store.open_constructs(run.rid, 8))[1][1]
    assert json.loads(body)["reopen"] == {"type": "TEXT_MESSAGE_START", "messageId": "m"}


async def test_one_commit_closes_constructs_of_many_runs_each_its_own(store: SqlStore) -> None:
    """Many runs in one commit, all using the same construct keys (keys are per run): a
    close reaches only its own run's open row; the runs that close nothing keep theirs
    open; a key opened twice in the commit is two rows, each closed by its next close."""
    runs = [await admit_running(store, f"t{i}", f"r{i}") for i in range(12)]
    text = ('["text","m"]', '{"reopen":{"type":"TEXT_MESSAGE_START","messageId":"m"},'
            '"close":{"type":"TEXT_MESSAGE_END","messageId":"m"},"lane":null,"chunked":false}')

    def write(run: RunRecord, prev: int, n: int,
              constructs: list[tuple[int, int, str, str | None]]) -> RunWrite:
        return RunWrite(rid=run.rid, tid=run.tid, run_id=run.id, attempt=1, instance="A",
                        prev_seq=prev, events=events_for(run, prev + 1, n),
                        constructs=constructs)

    assert await store.write([write(r, 0, 2, [(2, 0, *text)]) for r in runs]) == set()
    # Even runs close m at 3, open it again at 4 and close it at 5; odd runs only
    # write content, in the same commit.
    second = [write(r, 2, 3, [(3, 0, text[0], None), (4, 0, *text), (5, 0, text[0], None)]
                    if i % 2 == 0 else []) for i, r in enumerate(runs)]
    assert await store.write(second) == set()
    for i, run in enumerate(runs):
        open_at = {after: len(await store.open_constructs(run.rid, after))
                   for after in (2, 3, 4, 5)}
        assert open_at == ({2: 1, 3: 0, 4: 1, 5: 0} if i % 2 == 0 else
                           {2: 1, 3: 1, 4: 1, 5: 1}), (i, open_at)


async def test_a_key_closed_and_reopened_hundreds_of_times_in_one_commit(
        store: SqlStore) -> None:
    """More closes than one statement binds (SQLite chunks the rows): each open row of a
    key reused again and again still takes the first close after it."""
    run = await admit_running(store)
    text = ('["text","m"]', '{"reopen":{"type":"TEXT_MESSAGE_START","messageId":"m"},'
            '"close":{"type":"TEXT_MESSAGE_END","messageId":"m"},"lane":null,"chunked":false}')
    assert await store.write([RunWrite(
        rid=run.rid, tid=run.tid, run_id=run.id, attempt=1, instance="A", prev_seq=0,
        events=events_for(run, 1, 2), constructs=[(2, 0, *text)])]) == set()
    # m closes at every odd seq from 3 and opens again at every even one, 300 times.
    reused: list[tuple[int, int, str, str | None]] = []
    for seq in range(3, 603):
        reused.append((seq, 0, text[0], None) if seq % 2 else (seq, 0, *text))
    assert await store.write([RunWrite(
        rid=run.rid, tid=run.tid, run_id=run.id, attempt=1, instance="A", prev_seq=2,
        events=events_for(run, 3, 600), constructs=reused)]) == set()
    for after in (2, 3, 4, 255, 256, 257, 258, 600, 601, 602):
        assert len(await store.open_constructs(run.rid, after)) == int(after % 2 == 0), after


async def test_frames_pages_are_the_events_encoded_in_order(store: SqlStore) -> None:
    run = await admit_running(store)
    await append(store, run, 25)
    events = await store.read_events(run.rid, 0, 100)
    template = ("id: ", "\ndata: ", "\n\n")
    expected = "".join(f"id: {e.seq}\ndata: {e.body}\n\n" for e in events)
    pages = [await store.read_frames(run.rid, after, 10, template) for after in (0, 10, 20)]
    assert [upto for upto, _ in pages] == [10, 20, 25]
    assert "".join(text for _, text in pages) == expected
    assert await store.read_frames(run.rid, 25, 10, template) == (25, "")
    assert await store.read_frames(run.rid + 1000, 0, 10, template) == (0, "")
    # The caller's template, not the store, decides the format; its parts are data
    # (parameters), never SQL.
    odd = ("<'", "|%s|\\", "';--\n")
    upto, text = await store.read_frames(run.rid, 20, 3, odd)
    assert upto == 23
    assert text == "".join(f"<'{e.seq}|%s|\\{e.body}';--\n" for e in events[20:23])


async def test_snapshots_write_only_what_changed(store: SqlStore) -> None:
    run = await admit_running(store)
    empty = await store.get_snapshot(run.tid)
    assert (empty.messages, empty.state, empty.session_state, empty.as_of_run) == \
        ([], {}, {}, None)

    def msg(mid: str, text: str) -> str:
        return json.dumps({"id": mid, "role": "user", "content": text})

    await store.write([RunWrite(
        rid=run.rid, tid=run.tid, run_id=run.id, attempt=1, instance="A", prev_seq=0,
        events=events_for(run, 1, 2),
        snapshot=SnapshotWrite(as_of_run="r1", as_of_seq=2,
                               upserts=[("m2", 2.0, msg("m2", "two")),
                                        ("m1", 1.0, msg("m1", "one"))],
                               state_json='{"todos":[1]}', session_state_json='{"k":1}'),
    )])
    snap = await store.get_snapshot(run.tid)
    assert [m["id"] for m in snap.messages] == ["m1", "m2"]  # by position
    assert snap.positions == {"m1": 1.0, "m2": 2.0}
    assert snap.state == {"todos": [1]} and snap.session_state == {"k": 1}
    assert (snap.as_of_run, snap.as_of_seq) == ("r1", 2)

    await store.write([RunWrite(
        rid=run.rid, tid=run.tid, run_id=run.id, attempt=1, instance="A", prev_seq=2,
        events=events_for(run, 3, 1),
        snapshot=SnapshotWrite(as_of_run="r1", as_of_seq=3,
                               upserts=[("m1", 1.0, msg("m1", "ONE")),
                                        ("m3", 1.5, msg("m3", "between"))],
                               deletes=["m2"]),
    )])
    snap = await store.get_snapshot(run.tid)
    assert [(m["id"], m["content"]) for m in snap.messages] == [("m1", "ONE"),
                                                                ("m3", "between")]
    assert snap.state == {"todos": [1]} and snap.session_state == {"k": 1}  # kept
    assert snap.as_of_seq == 3
    thread = await store.get_thread(PRINCIPAL, "t1")
    assert thread is not None and (thread.as_of_run, thread.as_of_seq) == ("r1", 3)
    # A fenced write changes no snapshot either.
    await store.write([RunWrite(
        rid=run.rid, tid=run.tid, run_id=run.id, attempt=1, instance="X", prev_seq=3,
        events=events_for(run, 4, 1),
        snapshot=SnapshotWrite(as_of_run="r1", as_of_seq=4, deletes=["m1"],
                               state_json="{}"))])
    assert (await store.get_snapshot(run.tid)).as_of_seq == 3
    with pytest.raises(ThreadNotFound):
        await store.get_snapshot(run.tid + 1000)

    # Admission checks a new run's resent messages: it is handed those the thread
    # holds with the ids asked for (none of another principal's), and a check that raises
    # refuses the request whole.
    seen: list[list[tuple[str, str]]] = []

    def check(stored: list[tuple[str, str]]) -> None:
        messages = {mid: json.loads(body) for mid, body in stored}
        assert all(m["id"] == mid for mid, m in messages.items())
        seen.append(sorted((mid, m["content"]) for mid, m in messages.items()))
        if any(m["content"] == "between" for m in messages.values()):
            raise HistoryDiverged("m3 differs", messageId="m3")

    await finish(store, run)
    asked = replace(request("t1", "r2"), resent=["m1", "nope"], check_history=check)
    second = await store.admit(asked)
    assert second.created and seen == [[("m1", "ONE")]]
    assert not (await store.admit(asked)).created and len(seen) == 1  # a retry attaches
    with pytest.raises(HistoryDiverged):
        await store.admit(replace(request("t1", "r3"), resent=["m3", "m2"],
                                  check_history=check))
    assert seen[-1] == [("m3", "between")] and await store.get_run(PRINCIPAL, "r3") is None
    await store.admit(replace(request("t1", "x1", principal="someone-else"), resent=["m1"],
                              check_history=check))
    assert seen[-1] == []


async def test_finishing_ends_the_run_and_frees_the_thread(store: SqlStore) -> None:
    run = await admit_running(store)
    await append(store, run, 2)
    done = await finish(store, run, "succeeded")
    assert done.status == "succeeded" and done.finished_at is not None
    assert done.lease_holder is None and done.last_seq == 3
    assert done.outcome == {"type": "success"}
    thread = await store.get_thread(PRINCIPAL, "t1")
    assert thread is not None and thread.status == "idle"
    assert await store.active_runs(run.tid) == []
    assert await store.renew_leases("A", TTL) == []
    failed = await admit_running(store, "t1", "r2")
    await finish(store, failed, "failed")
    assert (await store.get_thread(PRINCIPAL, "t1")).status == "error"  # type: ignore[union-attr]


async def test_cancel_requests_and_queued_cancels(store: SqlStore) -> None:
    running = await admit_running(store, "t1", "r1")
    queued = (await store.admit(request("t1", "r2", multitask="enqueue"))).run
    flagged = await store.request_cancel(queued.rid)
    assert flagged is not None and flagged.cancel_requested and flagged.status == "queued"
    outcome = {"type": "cancelled"}
    assert await store.cancel_queued(queued.rid, ['{"type":"RUN_STARTED"}',
                                                  '{"type":"RUN_FINISHED"}'], outcome)
    gone = await store.get_run_by_rid(queued.rid)
    assert gone is not None and gone.status == "cancelled" and gone.last_seq == 2
    assert gone.outcome == outcome
    assert [(e.seq, e.boundary) for e in await store.read_events(queued.rid, 0, 10)] == \
        [(1, True), (2, True)]
    # A run that already started is not a queued cancel: its lease holder ends it.
    assert not await store.cancel_queued(running.rid, ["{}"], outcome)
    assert (await store.get_thread(PRINCIPAL, "t1")).status == "busy"  # type: ignore[union-attr]
    done = await finish(store, running, "cancelled")
    assert (await store.request_cancel(done.rid)).cancel_requested is False  # type: ignore[union-attr]
    assert await store.request_cancel(10_000_000) is None


# -- effects ------------------------------------------------------------------


async def test_effects_are_journaled_by_the_lease_holder_only(store: SqlStore) -> None:
    run = await admit_running(store, instance="A")
    assert await store.effect_get(run.rid, "step-1") is None
    with pytest.raises(LeaseLost):
        await store.effect_start(run.rid, "step-1", "B", 1)
    with pytest.raises(LeaseLost):
        await store.effect_start(run.rid, "step-1", "A", 2)
    assert await store.effect_get(run.rid, "step-1") is None
    await store.effect_start(run.rid, "step-1", "A", 1)
    started = await store.effect_get(run.rid, "step-1")
    assert started is not None and (started.status, started.attempt) == ("started", 1)
    with pytest.raises(LeaseLost):
        await store.effect_complete(run.rid, "step-1", "B", 1, '"x"')
    await store.effect_complete(run.rid, "step-1", "A", 1, '{"ok":true}')
    done = await store.effect_get(run.rid, "step-1")
    assert done is not None and done.status == "completed" and done.result == {"ok": True}
    # A takeover restarting the effect cannot reset a completed journal entry.
    await store.release_lease(run.rid, "A", 1)
    [taken] = await store.claim_expired("B", TTL, 10)
    await store.effect_start(run.rid, "step-1", "B", taken.attempts)
    again = await store.effect_get(run.rid, "step-1")
    assert again is not None and again.status == "completed" and again.result == {"ok": True}


# -- threads --------------------------------------------------------------------


async def test_deleting_a_thread_needs_it_idle(store: SqlStore) -> None:
    run = await admit_running(store)
    await append(store, run, 2)
    with pytest.raises(ThreadBusy):
        await store.delete_thread(PRINCIPAL, "t1")
    await finish(store, run)
    with pytest.raises(ThreadNotFound):
        await store.delete_thread("mallory", "t1")
    await store.delete_thread(PRINCIPAL, "t1")
    assert await store.get_thread(PRINCIPAL, "t1") is None
    assert await store.get_run(PRINCIPAL, "r1") is None
    assert await store.read_events(run.rid, 0, 10) == []
    with pytest.raises(ThreadNotFound):
        await store.delete_thread(PRINCIPAL, "t1")
    # The key is free again with its thread gone.
    assert (await store.admit(request("t1", "r1"))).created


async def test_threads_list_newest_first_by_status_and_page(store: SqlStore) -> None:
    base = time.time() - 100  # admitted in the past, in order
    for i in range(5):
        await store.admit(request(f"t{i}", f"r{i}", now=base + i))
    await store.admit(request("other", "x1", principal="bob"))
    [r0] = await store.claim_queued("A", TTL, 1)
    await finish(store, r0)  # t0 idle, touched last
    listed = (await store.list_threads(PRINCIPAL, None, 10, None)).threads
    assert [t.id for t in listed] == ["t0", "t4", "t3", "t2", "t1"]
    assert [t.id for t in (await store.list_threads(PRINCIPAL, "busy", 10, None)).threads] == \
        ["t4", "t3", "t2", "t1"]
    assert [t.id for t in (await store.list_threads(PRINCIPAL, "idle", 10, None)).threads] == \
        ["t0"]
    assert await store.list_threads(PRINCIPAL, "error", 10, None) == ThreadPage([], None)
    page1 = await store.list_threads(PRINCIPAL, None, 2, None)
    page2 = await store.list_threads(PRINCIPAL, None, 2, page1.next_cursor)
    page3 = await store.list_threads(PRINCIPAL, None, 2, page2.next_cursor)
    assert [t.id for t in page1.threads + page2.threads + page3.threads] == \
        ["t0", "t4", "t3", "t2", "t1"]
    assert page3.next_cursor is None  # the last page says so


async def test_thread_pages_are_complete_and_disjoint_with_equal_times(
        store: SqlStore) -> None:
    now = time.time() - 100
    for i in range(7):  # one instant for all: the thread id breaks the ties
        await store.admit(request(f"t{i}", f"r{i}", now=now))
    for i in range(3):
        await store.admit(request(f"b{i}", f"x{i}", principal="bob", now=now + 1))
    seen: list[str] = []
    cursor = None
    for _ in range(10):
        page = await store.list_threads(PRINCIPAL, None, 3, cursor)
        assert len(page.threads) <= 3
        seen += [t.id for t in page.threads]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert sorted(seen) == [f"t{i}" for i in range(7)] and len(seen) == 7
    assert seen == sorted(seen, reverse=True)


async def test_thread_cursors_are_opaque_and_owner_scoped(store: SqlStore) -> None:
    for i in range(3):
        await store.admit(request(f"t{i}", f"r{i}"))
        await store.admit(request(f"b{i}", f"x{i}", principal="bob"))
    alice = await store.list_threads(PRINCIPAL, None, 1, None)
    bob = await store.list_threads("bob", None, 1, None)
    assert alice.next_cursor is not None and bob.next_cursor is not None
    # Nothing internal in it: no tid, only the principal's own thread id and time.
    decoded = json.loads(base64.urlsafe_b64decode(alice.next_cursor + "=="))
    assert decoded[:2] == [alice.threads[0].updated_at, alice.threads[0].id]
    assert len(decoded) == 3 and isinstance(decoded[2], str)  # and a principal tag
    # Another principal's cursor is refused, never a view of that principal's threads.
    with pytest.raises(InvalidRequest):
        await store.list_threads("bob", None, 10, alice.next_cursor)
    with pytest.raises(InvalidRequest):
        await store.list_threads(PRINCIPAL, None, 10, bob.next_cursor)
    forged = base64.urlsafe_b64encode(json.dumps(
        [alice.threads[0].updated_at, alice.threads[0].id, "0" * 16]).encode()).decode()
    for garbage in ("abc", "!!!!", "", "e30", forged, alice.next_cursor[:-2],
                    base64.urlsafe_b64encode(b"[1e999, \"t1\", \"x\"]").decode()):
        with pytest.raises(InvalidRequest):
            await store.list_threads(PRINCIPAL, None, 10, garbage or "=")
    rest = await store.list_threads(PRINCIPAL, None, 10, alice.next_cursor)
    assert [t.id for t in alice.threads + rest.threads] == ["t2", "t1", "t0"]


async def test_runs_list_newest_first_and_page(store: SqlStore) -> None:
    for i in range(5):
        await store.admit(request("t1", f"r{i}", multitask="enqueue"))
    thread = await store.get_thread(PRINCIPAL, "t1")
    assert thread is not None
    page1 = await store.list_runs(thread.tid, 2, None)
    page2 = await store.list_runs(thread.tid, 2, page1[-1].rid)
    page3 = await store.list_runs(thread.tid, 2, page2[-1].rid)
    assert [r.id for r in page1 + page2 + page3] == ["r4", "r3", "r2", "r1", "r0"]


# -- upkeep and notifications -----------------------------------------------------


async def test_prune_forgets_old_keys(store: SqlStore) -> None:
    run = await admit_running(store, "t1", "r1")
    await append(store, run, 3)
    await finish(store, run)
    await store.prune(idempotency_before=time.time() - 3600)
    with pytest.raises(IdempotencyConflict):  # kept: younger than the retention
        await store.admit(request("t1", "r9", key="r1", body="other"))
    await store.prune(idempotency_before=time.time() + 1)
    # Events have a retention of their own (compact, tests/integration/test_retention.py).
    assert len(await store.read_events(run.rid, 0, 10)) == 4
    # The key is forgotten: the same key admits a new request now.
    assert (await store.admit(request("t1", "r9", key="r1", body="other"))).created


async def test_notifications_reach_every_handle(store: SqlStore, peer: SqlStore) -> None:
    await store.ping()
    got: dict[str, list[Notification]] = {"store": [], "peer": []}
    arrived = asyncio.Event()
    sent: list[Notification] = [EventsCommitted(7, 3, False), CancelRequested(7),
                                EventsCommitted(7, 9, True), WorkAvailable()]

    def on_store(n: Notification) -> None:
        got["store"].append(n)

    async def on_peer(n: Notification) -> None:
        got["peer"].append(n)
        if len(got["peer"]) >= len(sent):
            arrived.set()

    store.add_listener(on_store)
    if peer is not store:
        peer.add_listener(on_peer)
    else:
        store.add_listener(on_peer)
    for n in sent:
        await store.notify(n)
    await asyncio.wait_for(arrived.wait(), 5)
    assert got["peer"][:len(sent)] == sent
    for _ in range(100):
        if len(got["store"]) >= len(sent):
            break
        await asyncio.sleep(0.02)
    assert got["store"][:len(sent)] == sent


# -- PostgreSQL only: the LISTEN connection that carries hints between processes ----


@pytest.mark.postgres
async def test_postgres_listener_reconnects_after_its_connection_drops(pg_url: str) -> None:
    import asyncpg

    store = PostgresStore(pg_url, min_size=1, max_size=4)
    await store.open()
    admin = await asyncpg.connect(pg_url)
    got: list[Notification] = []
    store.add_listener(got.append)
    terminate = ("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                 "WHERE application_name = 'outlast-listen' AND datname = current_database()")
    try:
        assert await admin.fetchval(terminate) == 1
        deadline = time.monotonic() + 10
        while CancelRequested(42) not in got:
            assert time.monotonic() < deadline, got
            await store.notify(CancelRequested(42))
            await asyncio.sleep(0.2)
        # Hints sent while it was away are lost: it wakes the scheduler instead.
        assert WorkAvailable() in got
        assert await admin.fetchval(terminate) == 1  # listening again, on a new connection
    finally:
        await admin.close()
        await store.close()


@pytest.mark.postgres
async def test_postgres_processes_starting_at_once_migrate_once(pg_cluster: Any) -> None:
    import asyncpg

    name = f"empty_{uuid.uuid4().hex[:8]}"
    pg_cluster.psql(f"CREATE DATABASE {name}")
    url = pg_cluster.url(name)
    stores = [PostgresStore(url, min_size=1, max_size=2) for _ in range(4)]
    await asyncio.gather(*(s.open() for s in stores))
    try:
        con = await asyncpg.connect(url)
        try:
            versions = [r["version"] for r in
                        await con.fetch("SELECT version FROM schema_migrations")]
        finally:
            await con.close()
        assert sorted(versions) == [v for v, _ in migrations("postgres")]
        for s in stores:
            await s.ping()
    finally:
        for s in stores:
            await s.close()


def test_a_postgres_url_without_asyncpg_names_the_extra(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from outlast.errors import MissingDependency
    from outlast.store import open_store

    monkeypatch.setitem(sys.modules, "asyncpg", None)  # as if it were not installed
    with pytest.raises(MissingDependency) as err:
        open_store("postgresql://localhost/outlast", tmp_path)
    assert 'pip install "outlast[postgres]"' in err.value.message
