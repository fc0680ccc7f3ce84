"""The SQLite store's one write connection: who goes first, and admissions that wait
for it together committed in one transaction, each refused or kept on its own."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from pathlib import Path

import pytest

from outlast.errors import IdempotencyConflict, RunIdConflict
from outlast.store.base import AdmitRequest, AdmitResult, FinishWrite, RunWrite, StoredEvent
from outlast.store.sqlite import ADMISSIONS_AT_ONCE, SQLiteStore, WriteLock


async def test_a_group_commit_gives_way_to_waiting_requests_but_not_for_ever() -> None:
    lock = WriteLock()
    order: list[str] = []

    async def take(name: str, *, batch: bool = False) -> None:
        await lock.acquire(batch=batch)
        order.append(name)
        lock.release()

    await lock.acquire()
    waiters = [asyncio.create_task(take("commit", batch=True))]
    await asyncio.sleep(0)
    waiters += [asyncio.create_task(take(f"r{i}")) for i in range(WriteLock.GIVE_WAY + 2)]
    await asyncio.sleep(0)
    lock.release()
    await asyncio.gather(*waiters)
    # The requests that came after the commit go first, up to GIVE_WAY of them.
    assert order == [f"r{i}" for i in range(WriteLock.GIVE_WAY)] + ["commit", "r16", "r17"]


async def test_a_cancelled_waiter_takes_nothing_and_holds_nothing() -> None:
    lock = WriteLock()
    await lock.acquire()
    gone = asyncio.create_task(lock.acquire())
    after = asyncio.create_task(lock.acquire(batch=True))
    await asyncio.sleep(0)
    gone.cancel()
    lock.release()  # may find the cancelled waiter first: it must pass it on
    await asyncio.wait_for(after, 1.0)
    with pytest.raises(asyncio.CancelledError):
        await gone
    lock.release()
    await asyncio.wait_for(lock.acquire(), 1.0)  # free again
    lock.release()


def request(thread: str, run: str, key: str | None = None, body: str = "hi") -> AdmitRequest:
    payload = {"threadId": thread, "runId": run,
               "messages": [{"id": f"u-{run}", "role": "user", "content": body}]}
    return AdmitRequest(
        principal="o", thread_id=thread, run_id=run, agent="demo", key=key or run,
        fingerprint=f"{thread}:{run}:{body}", input_json=json.dumps(payload),
        options_json="{}", multitask="enqueue", resume=[], has_new_input=True, title=None,
        now=time.time(), claim_instance="me", claim_ttl=30.0, claim_limit=1,
        claim_start=True)


async def test_admissions_waiting_together_commit_together_and_are_refused_alone(
        tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "o.db")
    await store.open()
    try:
        await store.admit(request("t0", "taken"))
        reqs = [request(f"t{i}", f"r{i}") for i in range(1, 6)]
        reqs += [
            request("t9", "taken", key="another"),  # a runId used by another request
            request("t1", "r1", body="changed"),  # the key of r1, another body
            request("t2", "r2"),  # a retry of r2: attaches
        ]
        outcomes = await asyncio.gather(*(store.admit(r) for r in reqs),
                                        return_exceptions=True)
        created = outcomes[:5]
        assert all(isinstance(o, AdmitResult) and o.created for o in created)
        assert isinstance(outcomes[5], RunIdConflict)
        assert isinstance(outcomes[6], IdempotencyConflict)
        retry = outcomes[7]
        assert isinstance(retry, AdmitResult) and not retry.created
        assert retry.run.rid == created[1].run.rid  # type: ignore[union-attr]
        # Every created run is stored and started, whatever its neighbours did.
        for i, outcome in enumerate(created, start=1):
            assert isinstance(outcome, AdmitResult)
            stored = await store.get_run("o", f"r{i}")
            assert stored is not None and stored.last_seq == 1
            assert outcome.first is not None and \
                json.loads(outcome.first.body)["type"] == "RUN_STARTED"
            [event] = await store.read_events(stored.rid, 0, 10)
            assert event == outcome.first
        assert await store.get_thread("o", "t9") is None  # the refused one left nothing
    finally:
        await store.close()


async def test_more_admissions_than_one_group_takes_all_commit(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "o.db")
    await store.open()
    try:
        count = 2 * ADMISSIONS_AT_ONCE + 3
        outcomes = await asyncio.gather(*(store.admit(request(f"t{i}", f"r{i}"))
                                          for i in range(count)))
        assert all(o.created for o in outcomes)
        assert len({o.run.rid for o in outcomes}) == count
        for i in range(count):
            stored = await store.get_run("o", f"r{i}")
            assert stored is not None and stored.last_seq == 1
    finally:
        await store.close()


async def test_a_lease_a_commit_found_held_is_checked_again_once_anything_may_change_it(
        tmp_path: Path) -> None:
    """The group commit checks only last_seq for a run whose lease an earlier commit found
    held (``store.sqlite_fence``), until another transaction may have changed it: one of
    another connection, one of this store's own, or the run's end in a commit."""
    store = SQLiteStore(tmp_path / "o.db")
    await store.open()
    try:
        created = await store.admit(request("t1", "r1"))
        run = await store.get_run_by_rid(created.run.rid)
        assert run is not None and run.lease_holder == "me"
        seq = run.last_seq

        async def write(instance: str = "me", final: bool = False) -> set[int]:
            nonlocal seq
            fin = FinishWrite(status="succeeded") if final else None
            fenced = await store.write([RunWrite(
                rid=run.rid, tid=run.tid, run_id=run.id, attempt=run.attempts,
                instance=instance, prev_seq=seq,
                events=[StoredEvent(seq + 1, True, json.dumps({"type": "CUSTOM"}))],
                finish=fin)])
            seq += 0 if fenced else 1
            return fenced

        def lease_holder(holder: str | None) -> None:  # another connection's transaction
            with sqlite3.connect(tmp_path / "o.db") as db:
                db.execute("UPDATE runs SET lease_holder = ? WHERE rid = ?", (holder, run.rid))

        assert await write() == set()
        assert await write() == set()  # the lease known held: only last_seq checked
        assert await write("another") == {run.rid}  # another instance: checked, fenced
        lease_holder("someone")
        assert await write() == {run.rid}
        lease_holder("me")
        assert await write() == set()
        assert await write() == set()
        await store.expire_lease(run.rid, "me", run.attempts)  # this store's own
        assert await write() == {run.rid}
        lease_holder("me")
        assert await write(final=True) == set()
        assert await write() == {run.rid}  # ended in a commit: no longer running
        assert [e.seq for e in await store.read_events(run.rid, 0, 100)] == \
            list(range(1, seq + 1))
    finally:
        await store.close()
