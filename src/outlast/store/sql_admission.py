"""Admission's steps over SQL, each in the caller's write transaction, in the order
``SqlStore._admit`` takes them (docs/architecture.md, "A run's life"): lock the thread,
attach by key, check the history, the interrupts and the multitask policy, insert.

A step that refuses raises, and the transaction rolls back whatever came before it
(the thread row it may have made included): nothing of a refused request is stored."""

from __future__ import annotations

from dataclasses import replace

from outlast.errors import (
    IdempotencyConflict,
    InterruptExpired,
    InterruptNotPending,
    ResumeIncomplete,
    RunAlreadyActive,
    RunIdConflict,
)
from outlast.protocol.jsonutil import dumps
from outlast.store.base import AdmitRequest, AdmitResult, InterruptRecord, RunRecord
from outlast.store.sqlconn import Conn


async def lock_thread(c: Conn, req: AdmitRequest) -> int:
    """The thread's key, its row made if needed and locked (``FOR UPDATE`` on
    PostgreSQL; SQLite's one writer serializes already)."""
    # G3 across processes: take the thread's row lock before reading anything,
    # so a concurrent duplicate sees the winner's idempotency record and attaches.
    await c.run("thread_insert", principal=req.principal, id=req.thread_id, title=req.title,
                now=req.now)
    thread = await c.one("thread_lock", principal=req.principal, id=req.thread_id)
    assert thread is not None
    return int(thread["tid"])


async def attach(c: Conn, req: AdmitRequest) -> AdmitResult | None:
    """The run of the request's idempotency key (G3), None for a new request; refuses
    the key with another body and a ``runId`` another request took."""
    keys = await c.one("admission_keys", principal=req.principal, key=req.key, run_id=req.run_id)
    assert keys is not None
    if keys["rid"] is not None:
        row = await c.one("run_get_rid", rid=keys["rid"])
        assert row is not None
        if keys["fingerprint"] != req.fingerprint:
            raise IdempotencyConflict(
                "this idempotency key was used with a different request body",
                key=req.key,
            )
        return AdmitResult(RunRecord.from_row(row), created=False)
    if keys["run_id_taken"]:
        raise RunIdConflict(
            "this runId is already used by another request; choose a new runId",
            runId=req.run_id,
        )
    return None


async def check_history(c: Conn, req: AdmitRequest) -> frozenset[str] | None:
    """The ids of the resent messages the thread holds, after the engine's check that
    none has other content (``history_diverged``); None when nothing was checked."""
    if req.check_history is None or not req.resent:
        return None
    # In the transaction, not in a read before it: one trip to the database less
    # for every admission, and the thread cannot change in between.
    stored = [(r["id"], r["body"]) for r in await c.all(
        "messages_by_id", principal=req.principal, thread_id=req.thread_id,
        ids=dumps(req.resent))]
    req.check_history(stored)
    return frozenset(mid for mid, _ in stored)


async def check_interrupts(c: Conn, req: AdmitRequest, tid: int) -> None:
    """G7: a resume answers every pending interrupt of the thread, each still pending,
    not expired unless cancelled, in the shape its interrupt asks; a new input while
    interrupts wait is refused."""
    pending = [InterruptRecord.from_row(r)
               for r in await c.all("interrupts_pending_for_thread", tid=tid)]
    if not req.resume:
        if pending and req.has_new_input:
            raise ResumeIncomplete(
                "the thread is waiting for answers to its pending interrupts; "
                "send them in resume[] (or POST /threads/{id}/resume)",
                missing=[p.id for p in pending],
            )
        return
    answers = {a.interrupt_id for a in req.resume}
    missing = [p.id for p in pending if p.id not in answers]
    if missing:
        raise ResumeIncomplete(
            "the resume must answer every pending interrupt of the thread",
            missing=missing,
        )
    for answer in req.resume:
        row = await c.one("interrupt_get", tid=tid, id=answer.interrupt_id)
        if row is None or row["status"] != "pending":
            raise InterruptNotPending(
                f"interrupt {answer.interrupt_id!r} is not pending",
                interruptId=answer.interrupt_id,
                status=None if row is None else row["status"],
            )
        exp = row["expires_ts"]
        if exp is not None and exp <= req.now and answer.status == "resolved":
            raise InterruptExpired(
                f"interrupt {answer.interrupt_id!r} expired; it can only be cancelled",
                interruptId=answer.interrupt_id,
            )
        if req.check_answer is not None:
            req.check_answer(InterruptRecord.from_row(row).body, answer)


async def apply_multitask(c: Conn, req: AdmitRequest, tid: int) -> list[RunRecord]:
    """The thread's active runs this request supersedes (asked to stop, multitask
    ``interrupt``); multitask ``reject`` refuses a thread with an active run, and
    ``enqueue`` queues behind it."""
    active = [RunRecord.from_row(r) for r in await c.all("runs_active_for_thread", tid=tid)]
    if not active:
        return []
    if req.multitask == "reject":
        raise RunAlreadyActive(
            "the thread already has an active run", activeRunId=active[0].id
        )
    if req.multitask != "interrupt":
        return []
    for run in active:
        await c.run("run_request_cancel", rid=run.rid)
    return active


async def insert_run(c: Conn, req: AdmitRequest, tid: int) -> RunRecord:
    """The new run, queued, with its idempotency record (whose primary key makes a
    concurrent duplicate fail: it retries and attaches, G3), and the interrupts it
    answers marked answered, each only while still pending (G7: exactly one answer)."""
    row = await c.one(
        "run_insert", principal=req.principal, id=req.run_id, tid=tid, thread_id=req.thread_id,
        agent=req.agent, status="queued", idempotency_key=req.key,
        fingerprint=req.fingerprint, input=req.input_json, options=req.options_json,
        now=req.now, protocol_version=req.protocol_version,
    )
    assert row is not None
    run = replace(RunRecord.from_row(row), input_json=req.input_json)  # not sent back
    await c.run("idempotency_insert", principal=req.principal, key=req.key, rid=run.rid,
                fingerprint=req.fingerprint, now=req.now)
    for answer in req.resume:
        changed = await c.run(
            "interrupt_answer", tid=tid, id=answer.interrupt_id, status=answer.status,
            answered_by=req.principal, now=req.now, continuation_rid=run.rid,
            resolution=dumps({"status": answer.status, "payload": answer.payload}),
        )
        if changed != 1:
            raise InterruptNotPending(
                f"interrupt {answer.interrupt_id!r} is not pending",
                interruptId=answer.interrupt_id,
            )
    return run
