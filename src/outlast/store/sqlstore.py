"""Store logic shared by the SQL backends, written once over named queries.

A backend supplies connections (``_write()``, ``_read()``) whose methods take
a query name and keyword parameters (the same names exist in every dialect,
see ``sql/``), and a lock that serializes migrations; the migration runner,
like everything else here, is shared.
"""

from __future__ import annotations

import json
import time
from abc import abstractmethod
from collections.abc import Callable, Coroutine, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, TypeVar

from outlast.errors import (
    LeaseLost,
    ThreadBusy,
    ThreadIdConflict,
    ThreadNotFound,
)
from outlast.protocol.jsonutil import dumps
from outlast.store import sql_admission as admission
from outlast.store.base import (
    AdmitRequest,
    AdmitResult,
    EffectRecord,
    ForkWrite,
    InterruptRecord,
    LeaseState,
    Listener,
    OpenAt,
    RunRecord,
    RunWrite,
    Snapshot,
    StartInput,
    Store,
    StoredEvent,
    ThreadPage,
    ThreadRecord,
    ThreadView,
    WebhookWrite,
    takeover_margin,
)
from outlast.store.cursors import decode_thread_cursor, encode_thread_cursor
from outlast.store.notifications import Notification
from outlast.store.sql import Query, load_queries, migrations
from outlast.store.sql_limits import check_limits
from outlast.store.sql_retention import RetentionSql
from outlast.store.sql_usage import UsageSql
from outlast.store.sql_webhooks import WebhooksSql
from outlast.store.sqlconn import Conn, Row, UniqueViolation
from outlast.store.sqlwrite import insert_webhooks, start_runs, write_batch

T = TypeVar("T")
Body = Callable[[Conn], Coroutine[Any, Any, T]]
"""A transaction's body: awaits only its connection's methods (and helpers that do)."""


class SqlStore(RetentionSql, WebhooksSql, UsageSql, Store):
    """The Store interface implemented over a backend's named-query connections."""

    def __init__(self, dialect: str) -> None:
        self._listeners: list[Listener] = []
        # Loaded (and checked against the other dialects) now: a missing query
        # fails at startup, not on first use.
        self._queries: dict[str, Query] = load_queries(dialect)
        self._migrations = migrations(dialect)

    @abstractmethod
    def _write(self) -> AbstractAsyncContextManager[Conn]:
        """A write transaction (serialized per thread row at least)."""

    @abstractmethod
    def _read(self) -> AbstractAsyncContextManager[Conn]:
        """A read-only connection."""

    async def _in_write(self, body: Body[T], *, batch: bool = False) -> T:
        """``body`` in one write transaction. A body awaits nothing but its connection, so
        a backend may run it whole elsewhere, in one trip (SQLite: in a thread). ``batch``
        marks a group commit, which a backend with one writer may let others go before."""
        async with self._write() as c:
            return await body(c)

    async def _read_one(self, name: str, **params: Any) -> Row | None:
        """The first row of one statement, which sees one snapshot by itself (a backend
        may spare it a transaction)."""
        return await self._in_read(lambda c: c.one(name, **params))

    async def _read_all(self, name: str, **params: Any) -> list[Row]:
        """Every row of one statement (as ``_read_one``)."""
        return await self._in_read(lambda c: c.all(name, **params))

    async def _in_read(self, body: Body[T]) -> T:
        """``body`` in one read transaction (one snapshot), under the same rule."""
        async with self._read() as c:
            return await body(c)

    @abstractmethod
    def _migration_lock(self) -> AbstractAsyncContextManager[None]:
        """Held while migrating, so processes starting at once apply each migration once."""

    async def _migrate(self) -> None:
        """Apply the dialect's pending migrations, each in its own write transaction."""
        async with self._migration_lock():
            async with self._write() as c:
                await c.run("schema_migrations_create")
                row = await c.one("schema_version_get")
            current = 0 if row is None else int(row["version"])
            for version, script in self._migrations:
                if version <= current:
                    continue
                async with self._write() as c:
                    await c.script(script)
                    await c.run("schema_version_insert", version=version, now=time.time())

    # -- admission -------------------------------------------------------
    async def admit(self, req: AdmitRequest) -> AdmitResult:
        # G3: one transaction decides; a concurrent duplicate that loses the
        # race on the idempotency key's primary key retries and attaches.
        for attempt in range(3):
            try:
                return await self._in_write(lambda c: self._admit(c, req))
            except UniqueViolation:
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    async def _admit(self, c: Conn, req: AdmitRequest) -> AdmitResult:
        """One admission in the caller's write transaction, step by step
        (``sql_admission``): a refused one raises, and nothing of it stays."""
        tid = await admission.lock_thread(c, req)
        attached = await admission.attach(c, req)
        if attached is not None:
            return attached
        if req.limits is not None and req.limits.any:
            await check_limits(c, req.principal, req.limits, req.now)
        held = await admission.check_history(c, req)  # the resent messages the thread holds
        await admission.check_interrupts(c, req, tid)
        superseded = await admission.apply_multitask(c, req, tid)
        run = await admission.insert_run(c, req, tid)
        claimed: list[RunRecord] = []
        started: dict[int, StoredEvent] = {}
        if req.claim_instance is not None and req.claim_limit > 0:
            known = {} if req.input is None else {run.rid: StartInput(req.input, held)}
            claimed, started = await self._claim(c, req.claim_instance, req.claim_ttl,
                                                 req.claim_limit, req.now, req.claim_start,
                                                 known)
            run = next((r for r in claimed if r.rid == run.rid), run)
        if all(r.tid != tid for r in claimed):  # the claim refreshed its threads already
            await c.run("thread_refresh_status", tid=tid, now=req.now)
        return AdmitResult(run, created=True, superseded=superseded, claimed=claimed,
                           first=started.get(run.rid))

    # -- reads -----------------------------------------------------------
    async def get_thread(self, principal: str, thread_id: str) -> ThreadRecord | None:
        row = await self._read_one("thread_get", principal=principal, id=thread_id)
        return None if row is None else ThreadRecord.from_row(row)

    async def list_threads(
        self, principal: str, status: str | None, limit: int, cursor: str | None
    ) -> ThreadPage:
        before = None if cursor is None else decode_thread_cursor(principal, cursor)
        async with self._read() as c:
            # One row more than the page: a next cursor only when there is a next page.
            rows = await c.all(
                "thread_list", principal=principal, status=status, limit=limit + 1,
                before_updated=None if before is None else before[0],
                before_id=None if before is None else before[1],
            )
        threads = [ThreadRecord.from_row(r) for r in rows[:limit]]
        more = len(rows) > limit
        last = threads[-1] if threads else None
        return ThreadPage(threads, encode_thread_cursor(principal, last.updated_at, last.id)
                          if more and last is not None else None)

    async def get_snapshot(self, tid: int) -> Snapshot:
        # One read transaction: messages and coordinate agree (G5).
        return await self._in_read(lambda c: self._snapshot(c, tid))

    async def thread_view(self, principal: str, thread_id: str) -> ThreadView | None:
        return await self._in_read(lambda c: self._thread_view(c, principal, thread_id))

    async def _thread_view(self, c: Conn, principal: str, thread_id: str) -> ThreadView | None:
        row = await c.one("thread_get", principal=principal, id=thread_id)
        if row is None:
            return None
        tid = row["tid"]
        return ThreadView(
            thread=ThreadRecord.from_row(row),
            snapshot=await self._snapshot(c, tid),
            interrupts=[InterruptRecord.from_row(r)
                        for r in await c.all("interrupts_pending_for_thread", tid=tid)],
            active=[RunRecord.from_row(r)
                    for r in await c.all("runs_active_for_thread", tid=tid)],
        )

    async def _snapshot(self, c: Conn, tid: int) -> Snapshot:
        thread = await c.one("thread_get_tid", tid=tid)
        rows = await c.all("messages_list", tid=tid)
        if thread is None:
            raise ThreadNotFound("thread not found")
        return Snapshot(
            messages=[json.loads(r["body"]) for r in rows],
            positions={r["id"]: r["position"] for r in rows},
            state=json.loads(thread["state"]),
            session_state=json.loads(thread["session_state"]),
            as_of_run=thread["as_of_run"],
            as_of_seq=thread["as_of_seq"],
        )

    async def delete_thread(self, principal: str, thread_id: str) -> None:
        async with self._write() as c:
            thread = await c.one("thread_lock", principal=principal, id=thread_id)
            if thread is None:
                raise ThreadNotFound("thread not found", threadId=thread_id)
            if await c.all("runs_active_for_thread", tid=thread["tid"]):
                raise ThreadBusy("the thread has an active run; cancel it first",
                                 threadId=thread_id)
            await c.run("thread_delete", tid=thread["tid"])

    async def get_run(self, principal: str, run_id: str) -> RunRecord | None:
        row = await self._read_one("run_get", principal=principal, id=run_id)
        return None if row is None else RunRecord.from_row(row)

    async def get_run_by_rid(self, rid: int) -> RunRecord | None:
        row = await self._read_one("run_get_rid", rid=rid)
        return None if row is None else RunRecord.from_row(row)

    async def list_runs(self, tid: int, limit: int, before_rid: int | None) -> list[RunRecord]:
        rows = await self._read_all("runs_list_thread", tid=tid, limit=limit,
                                    before_rid=before_rid)
        return [RunRecord.from_row(r) for r in rows]

    async def active_runs(self, tid: int) -> list[RunRecord]:
        rows = await self._read_all("runs_active_for_thread", tid=tid)
        return [RunRecord.from_row(r) for r in rows]

    async def read_events(self, rid: int, after: int, limit: int) -> list[StoredEvent]:
        rows = await self._read_all("events_after", rid=rid, after=after, limit=limit)
        return [StoredEvent(r["seq"], bool(r["boundary"]), r["body"]) for r in rows]

    async def read_frames(
        self, rid: int, after: int, limit: int, template: tuple[str, str, str]
    ) -> tuple[int, str]:
        head, sep, tail = template
        row = await self._read_one("events_frames_after", rid=rid, after=after, limit=limit,
                                   head=head, sep=sep, tail=tail)
        if row is None or not row["n"]:
            return after, ""
        return int(row["last_seq"]), str(row["text"])

    async def last_boundary(self, rid: int, upto: int) -> int:
        row = await self._read_one("event_last_boundary", rid=rid, upto=upto)
        return 0 if row is None else int(row["seq"])

    async def open_constructs(self, rid: int, after: int) -> list[tuple[str, str]]:
        rows = await self._read_all("constructs_open_at", rid=rid, after=after)
        return [(str(r["ckey"]), str(r["body"])) for r in rows]

    async def open_at(self, rid: int, after: int) -> OpenAt:
        async def body(c: Conn) -> OpenAt:
            rows = await c.all("constructs_open_at", rid=rid, after=after)
            mark = await c.one("run_state_at", rid=rid, after=after)
            state, events = None, []
            if mark is not None:
                seq, upto = int(mark["seq"]), min(int(mark["upto"]), after)
                state = (seq, int(mark["upto"]), str(mark["body"]))
                events = [StoredEvent(r["seq"], bool(r["boundary"]), r["body"]) for r in
                          await c.all("events_state_between", rid=rid, first=seq,
                                      upto=upto)]
            return OpenAt([(str(r["ckey"]), str(r["body"])) for r in rows], state, events)

        return await self._in_read(body)

    async def state_mark(self, rid: int, after: int) -> tuple[int, int, str] | None:
        async with self._read() as c:
            row = await c.one("run_state_at", rid=rid, after=after)
        return None if row is None else (int(row["seq"]), int(row["upto"]), str(row["body"]))

    async def interrupts(
        self, *, tid: int | None = None, rid: int | None = None, pending: bool = False
    ) -> list[InterruptRecord]:
        async with self._read() as c:
            if rid is not None:
                rows = await c.all("interrupts_for_run", rid=rid)
            elif pending:
                rows = await c.all("interrupts_pending_for_thread", tid=tid)
            else:
                rows = await c.all("interrupts_for_thread", tid=tid)
        records = [InterruptRecord.from_row(r) for r in rows]
        return [r for r in records if r.status == "pending"] if pending else records

    async def resolved_by(self, rid: int) -> list[InterruptRecord]:
        rows = await self._read_all("interrupts_resolved_by_run", rid=rid)
        return [InterruptRecord.from_row(r) for r in rows]

    async def probe_write(self) -> None:
        await self._in_write(lambda c: c.run("schema_version_touch"))

    # -- leases ----------------------------------------------------------
    async def claim_queued(self, instance: str, ttl: float, limit: int, *,
                           start: bool = False) -> list[RunRecord]:
        now = time.time()
        runs, _ = await self._in_write(
            lambda c: self._claim(c, instance, ttl, limit, now, start))
        return runs

    @staticmethod
    async def _claim(c: Conn, instance: str, ttl: float, limit: int, now: float,
                     start: bool, known: Mapping[int, StartInput] | None = None,
                     ) -> tuple[list[RunRecord], dict[int, StoredEvent]]:
        """The runs claimed, and the first event of each one started (``known``: what
        admission knows of its run, by rid)."""
        rows = await c.all("run_claim_queued", instance=instance, expires=now + ttl, ttl=ttl,
                           now=now, limit=limit)
        for tid in {r["tid"] for r in rows}:
            await c.run("thread_refresh_status", tid=tid, now=now)
        runs = sorted((RunRecord.from_row(r) for r in rows), key=lambda r: r.rid)
        return await start_runs(c, runs, instance, now, known) if start else (runs, {})

    async def claim_expired(
        self, instance: str, ttl: float, limit: int, all_foreign: bool = False
    ) -> list[RunRecord]:
        # G8: taken over only ``takeover_margin`` past the expiry, once the holder stopped.
        now = time.time()
        margin = takeover_margin(ttl)
        rows = await self._in_write(lambda c: c.all(
            "run_claim_expired", instance=instance, expires=now + ttl, ttl=ttl,
            now=now - margin, margin=margin, limit=limit, all_foreign=1 if all_foreign else 0))
        return sorted((RunRecord.from_row(r) for r in rows), key=lambda r: r.rid)

    async def renew_leases(self, instance: str, ttl: float,
                           rids: list[int] | None = None) -> list[LeaseState]:
        rows = await self._in_write(lambda c: c.all("run_renew_leases", instance=instance,
                                             rids=None if rids is None else json.dumps(rids),
                                             expires=time.time() + ttl, ttl=ttl))
        return [LeaseState(r["rid"], r["attempts"], bool(r["cancel_requested"])) for r in rows]

    async def release_lease(self, rid: int, instance: str, attempt: int) -> None:
        await self._in_write(lambda c: c.run("run_release_lease", rid=rid, instance=instance,
                                             attempt=attempt))

    async def expire_lease(self, rid: int, instance: str, attempt: int) -> None:
        await self._in_write(lambda c: c.run("run_expire_lease", rid=rid, instance=instance,
                                             attempt=attempt))

    # -- writing runs ----------------------------------------------------
    async def write(self, batch: list[RunWrite]) -> set[int]:
        if not batch:
            return set()
        now = time.time()
        known = self._known_leases()
        return await self._in_write(lambda c: write_batch(c, batch, now, known), batch=True)

    def _known_leases(self) -> set[tuple[int, str, int]] | None:
        """The (rid, instance, attempt) whose lease the group commit may take as held
        without a lookup, kept up to date by the commits (``write_batch``); None: none
        (another process may take a lease over; SQLite: ``store.sqlite_fence``)."""
        return None

    async def request_cancel(self, rid: int) -> RunRecord | None:
        async with self._write() as c:
            await c.run("run_request_cancel", rid=rid)
            row = await c.one("run_get_rid", rid=rid)
        return None if row is None else RunRecord.from_row(row)

    async def cancel_queued(self, rid: int, events: list[str], outcome: dict[str, Any],
                            webhooks: Sequence[WebhookWrite] = ()) -> bool:
        now = time.time()
        async with self._write() as c:
            row = await c.one("run_cancel_queued", rid=rid, now=now, outcome=dumps(outcome))
            if row is None:
                return False
            await c.run("run_seq_set", rid=rid, last_seq=len(events))
            await insert_webhooks(c, rid, webhooks, now)
            await c.many("event_insert", [
                {"rid": rid, "seq": i + 1, "boundary": 1, "body": body}
                for i, body in enumerate(events)
            ])
            await c.run("thread_refresh_status", tid=row["tid"], now=now)
        return True

    # -- effects ---------------------------------------------------------
    async def effect_get(self, rid: int, key: str) -> EffectRecord | None:
        row = await self._read_one("effect_get", rid=rid, key=key)
        if row is None:
            return None
        result = None if row["result"] is None else json.loads(row["result"])
        return EffectRecord(row["key"], row["attempt"], row["status"], result)

    async def _fence(self, c: Conn, rid: int, instance: str, attempt: int) -> None:
        if await c.one("run_holds_lease", rid=rid, instance=instance, attempt=attempt) is None:
            raise LeaseLost("this process no longer holds the run's lease", rid=rid)

    async def effect_start(self, rid: int, key: str, instance: str, attempt: int) -> None:
        async def start(c: Conn) -> None:
            await self._fence(c, rid, instance, attempt)
            await c.run("effect_start", rid=rid, key=key, attempt=attempt, now=time.time())

        await self._in_write(start)

    async def effect_complete(
        self, rid: int, key: str, instance: str, attempt: int, result_json: str
    ) -> None:
        async def complete(c: Conn) -> None:
            await self._fence(c, rid, instance, attempt)
            await c.run("effect_complete", rid=rid, key=key, result=result_json,
                        now=time.time())

        await self._in_write(complete)

    # -- upkeep ----------------------------------------------------------
    async def prune(self, idempotency_before: float) -> None:
        async with self._write() as c:
            await c.run("idempotency_prune", cutoff=idempotency_before)

    # -- notifications ---------------------------------------------------
    def add_listener(self, listener: Listener) -> None:
        self._listeners.append(listener)

    async def _dispatch(self, notification: Notification) -> None:
        for listener in list(self._listeners):
            result = listener(notification)
            if result is not None:
                await result

    # -- fork ------------------------------------------------------------
    async def fork_thread(self, fork: ForkWrite) -> ThreadRecord:
        async with self._write() as c:
            row = await c.one(
                "fork_thread_insert", principal=fork.principal, id=fork.thread_id, title=fork.title,
                now=fork.now, state=dumps(fork.state), session_state=dumps(fork.session_state),
                forked_from=dumps(fork.forked_from))
            if row is None:
                raise ThreadIdConflict("a thread with this id exists already; choose a new id",
                                       threadId=fork.thread_id)
            tid = row["tid"]
            await c.run("fork_base_insert", tid=tid, messages=dumps(fork.messages),
                        state=dumps(fork.state))
            if fork.messages:
                await c.many("message_upsert", [
                    {"tid": tid, "id": m["id"], "position": float(i + 1), "body": dumps(m)}
                    for i, m in enumerate(fork.messages)])
            if fork.interrupts:
                await c.many("fork_interrupt_insert", [
                    {"tid": tid, "id": i.id, "rid": i.rid, "run_id": i.run_id,
                     "body": dumps(i.body), "expires_ts": i.expires_ts}
                    for i in fork.interrupts])
            await c.run("thread_refresh_status", tid=tid, now=fork.now)
            thread = await c.one("thread_get_tid", tid=tid)
        assert thread is not None
        return ThreadRecord.from_row(thread)

    async def fork_base(self, tid: int) -> tuple[list[dict[str, Any]], Any] | None:
        row = await self._read_one("fork_base_get", tid=tid)
        if row is None:
            return None
        return json.loads(row["messages"]), json.loads(row["state"])

    async def runs_upto(self, tid: int, rid: int) -> list[RunRecord]:
        rows = await self._read_all("fork_runs_upto", tid=tid, rid=rid)
        return [RunRecord.from_row(r) for r in rows]
