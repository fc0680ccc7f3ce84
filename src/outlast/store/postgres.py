"""The shared store: PostgreSQL through an asyncpg pool, for several processes.

Every decision that must hold across processes is made by the database: row
locks serialize admissions per thread (G3), lease claims are single statements
with ``FOR UPDATE SKIP LOCKED`` (G8), fenced appends match only the lease holder
(G2). LISTEN/NOTIFY carries wake-ups between processes; they are hints only,
the log stays the source of truth (readers re-read it, and poll when no hint
comes).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import asyncpg

from outlast.protocol.jsonutil import dumps
from outlast.store.base import (
    AdmitRequest,
    AdmitResult,
    Freed,
    LeaseRenewer,
    LeaseState,
    RunRecord,
    RunWrite,
    WebhookWrite,
)
from outlast.store.notifications import CHANNELS, Notification, WorkAvailable, decode, encode
from outlast.store.outage import outages, postgres_outage
from outlast.store.pglink import (
    CONNECT_TIMEOUT,
    SERVER_SETTINGS,
    STATEMENT_TIMEOUT,
    connect,
    on_connect,
)
from outlast.store.sql import Query
from outlast.store.sqlconn import Row, UniqueViolation
from outlast.store.sqlstore import SqlStore

log = logging.getLogger("outlast.store.postgres")

T = TypeVar("T")

# pg_advisory_lock key that serializes migrations of processes starting at once.
MIGRATION_LOCK = 0x6F75746C617374
DEADLOCK_RETRIES = 5
LISTEN_PING = 10.0
LISTEN_APPLICATION = "outlast-listen"  # how the LISTEN connection shows in pg_stat_activity
# Retention: least time between two VACUUMs of the events table by this process.
VACUUM_EVERY = 10.0


IDLE_IN_TRANSACTION_MS = "10000"
"""How long PostgreSQL lets one of our transactions sit idle: ours never wait between
statements, so only a frozen process reaches it."""
MAINTENANCE_TIMEOUT = 24 * 3600.0
"""Seconds a migration script or a VACUUM may take (the statement timeout is not theirs)."""

def _floor_retry(record: logging.LogRecord) -> bool:
    """asyncpg retries its pool's connection floor while the database is out of reach,
    logging a traceback at every try: the outage is said once (``engine.outages``)."""
    return not record.getMessage().startswith("Failed to restore the pool connection floor")


logging.getLogger("asyncpg.pool").addFilter(_floor_retry)


class _Conn:
    """Named-query adapter over one asyncpg connection inside a transaction."""

    def __init__(self, con: asyncpg.Connection, queries: Mapping[str, Query]) -> None:
        self._con = con
        self._q = queries

    def _args(self, name: str, params: Mapping[str, Any]) -> list[Any]:
        return [params.get(k) for k in self._q[name].params]

    async def one(self, name: str, **params: Any) -> Row | None:
        row = await self._con.fetchrow(self._q[name].sql, *self._args(name, params))
        return None if row is None else dict(row)

    async def all(self, name: str, **params: Any) -> list[Row]:
        rows = await self._con.fetch(self._q[name].sql, *self._args(name, params))
        return [dict(r) for r in rows]

    async def column(self, name: str, **params: Any) -> list[Any]:
        rows = await self._con.fetch(self._q[name].sql, *self._args(name, params))
        return [r[0] for r in rows]

    async def run(self, name: str, **params: Any) -> int:
        status: str = await self._con.execute(self._q[name].sql, *self._args(name, params))
        tail = status.rsplit(" ", 1)[-1]
        return int(tail) if tail.isdigit() else 0

    async def many(self, name: str, rows: Sequence[Mapping[str, Any]]) -> None:
        if rows:
            await self._con.executemany(self._q[name].sql,
                                        [self._args(name, r) for r in rows])

    async def rows(self, name: str, rows: Sequence[Sequence[Any]]) -> list[Any]:
        # One statement whatever the rows: their JSON array, unpacked by the query.
        return await self.column(name, rows=dumps(rows))

    async def script(self, sql: str) -> None:
        # No arguments: the simple protocol, which runs several statements at once.
        await self._con.execute(sql, timeout=MAINTENANCE_TIMEOUT)


async def _keep_session(con: asyncpg.Connection) -> None:
    """A pooled connection is handed back as it is: no pooled work changes session state
    (LISTEN has a connection of its own, the migration lock is released explicitly, and
    nothing SETs), so the default reset query would only cost a round trip per use.
    asyncpg still rolls back a transaction left open."""


class PostgresStore(SqlStore):
    """Store over one PostgreSQL database shared by any number of ``outlast serve`` processes."""

    def __init__(self, url: str, *, min_size: int = 2, max_size: int = 20) -> None:
        super().__init__("postgres")
        if max_size < 2:
            # Migrating holds one connection for the lock and writes on another.
            raise ValueError("a PostgreSQL store needs a pool of at least 2 connections")
        self.url = url
        self._min_size = min_size
        self._max_size = max_size
        self._pool: asyncpg.Pool | None = None
        self._closing = False
        self._listener: asyncio.Task[None] | None = None
        self._listening = asyncio.Event()
        self._inbox: asyncio.Queue[Notification] = asyncio.Queue()
        self._dispatcher: asyncio.Task[None] | None = None
        self._outbox: list[tuple[str, str, asyncio.Future[None]]] = []
        self._sender: asyncio.Task[None] | None = None
        self._compacted = False  # events removed since this process last vacuumed
        self._vacuumed = 0.0

    def lease_renewer(self) -> LeaseRenewer:
        return _PgRenewer(self.url, self._queries)

    @property
    def exclusive(self) -> bool:
        """False: other processes may hold leases; take runs over only after their TTL."""
        return False

    # -- lifecycle --------------------------------------------------------
    async def open(self) -> None:
        self._closing = False
        # G8: a process frozen inside a transaction (SIGSTOP, a stalled VM) would keep its
        # row locks, and the takeover claim skips locked runs: the server ends such a
        # transaction after a while, which fences the frozen process off.
        # A partition is not a crash: every connection notices a dead peer within seconds
        # (``store.pglink``), so the store answers StoreUnavailable instead of hanging.
        self._pool = await asyncpg.create_pool(
            self.url, min_size=self._min_size, max_size=self._max_size,
            timeout=CONNECT_TIMEOUT, command_timeout=STATEMENT_TIMEOUT, init=on_connect,
            server_settings={**SERVER_SETTINGS,
                             "idle_in_transaction_session_timeout": IDLE_IN_TRANSACTION_MS},
            reset=_keep_session)
        await self._migrate()
        self._dispatcher = asyncio.create_task(self._dispatch_loop(), name="outlast-pg-dispatch")
        self._listener = asyncio.create_task(self._listen_loop(), name="outlast-pg-listen")
        # Listen before serving, so no hint sent after start-up is missed.
        listening = asyncio.create_task(self._listening.wait())
        await asyncio.wait({listening, self._listener}, timeout=30,
                           return_when=asyncio.FIRST_COMPLETED)
        listening.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await listening
        if not self._listening.is_set():
            await self.close()
            raise ConnectionError("could not LISTEN on the PostgreSQL store")

    @asynccontextmanager
    async def _migration_lock(self) -> AsyncIterator[None]:
        # A session-level advisory lock on a connection of its own: the migrations
        # run in ordinary write transactions while it is held.
        assert self._pool is not None
        async with self._pool.acquire() as con:
            await con.execute("SELECT pg_advisory_lock($1)", MIGRATION_LOCK)
            try:
                yield
            finally:
                await con.execute("SELECT pg_advisory_unlock($1)", MIGRATION_LOCK)

    async def close(self) -> None:
        self._closing = True
        if self._sender is not None:
            with contextlib.suppress(Exception):
                await self._sender
        for task in (self._listener, self._dispatcher):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._listener = self._dispatcher = None
        self._listening.clear()
        if self._pool is not None:
            await self._pool.close()
            self._pool = None

    async def ping(self) -> None:
        async with self._read() as c:
            await c.one("schema_version_get")

    # -- transactions -----------------------------------------------------
    @asynccontextmanager
    async def _write(self) -> AsyncIterator[_Conn]:
        assert self._pool is not None, "store is not open"
        async with outages(postgres_outage, self.report_outage, write=True), \
                self._pool.acquire() as con:
            try:
                async with con.transaction():
                    yield _Conn(con, self._queries)
            except asyncpg.UniqueViolationError as exc:
                raise UniqueViolation(str(exc)) from exc

    async def _read_one(self, name: str, **params: Any) -> Row | None:
        # One statement sees one snapshot by itself: no transaction, one round trip.
        assert self._pool is not None, "store is not open"
        async with outages(postgres_outage), self._pool.acquire() as con:
            return await _Conn(con, self._queries).one(name, **params)

    async def _read_all(self, name: str, **params: Any) -> list[Row]:
        assert self._pool is not None, "store is not open"
        async with outages(postgres_outage), self._pool.acquire() as con:
            return await _Conn(con, self._queries).all(name, **params)

    @asynccontextmanager
    async def _read(self) -> AsyncIterator[_Conn]:
        assert self._pool is not None, "store is not open"
        async with outages(postgres_outage), self._pool.acquire() as con, \
                con.transaction(isolation="repeatable_read", readonly=True):
            # One snapshot for every statement: a snapshot's messages and its
            # coordinate agree (G5).
            yield _Conn(con, self._queries)

    async def _retrying(self, op: Callable[[], Awaitable[T]]) -> T:
        """Re-run a whole transaction PostgreSQL aborted to break a lock cycle."""
        for attempt in range(DEADLOCK_RETRIES):
            try:
                return await op()
            except asyncpg.TransactionRollbackError:
                if attempt == DEADLOCK_RETRIES - 1:
                    raise
                log.info("transaction rolled back by a lock conflict; retrying")
        raise AssertionError("unreachable")

    # Row locks are taken in one order (see queries.sql), so lock cycles are not
    # expected; should PostgreSQL still abort a transaction to break one, the
    # whole transaction runs again.
    async def admit(self, req: AdmitRequest) -> AdmitResult:
        return await self._retrying(lambda: SqlStore.admit(self, req))

    async def write(self, batch: list[RunWrite]) -> set[int]:
        # Runs in rid order: the order the heartbeat's renewal locks them in.
        ordered = sorted(batch, key=lambda w: w.rid)
        return await self._retrying(lambda: SqlStore.write(self, ordered))

    async def claim_queued(self, instance: str, ttl: float, limit: int, *,
                           start: bool = False) -> list[RunRecord]:
        return await self._retrying(
            lambda: SqlStore.claim_queued(self, instance, ttl, limit, start=start))

    async def cancel_queued(self, rid: int, events: list[str], outcome: dict[str, Any],
                            webhooks: Sequence[WebhookWrite] = ()) -> bool:
        return await self._retrying(
            lambda: SqlStore.cancel_queued(self, rid, events, outcome, webhooks))

    # -- notifications ----------------------------------------------------
    async def notify(self, notification: Notification) -> None:
        """``pg_notify`` to every process; hints sent together go in one round trip."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        channel, payload = encode(notification)
        self._outbox.append((channel, payload, fut))
        if self._sender is None or self._sender.done():
            self._sender = asyncio.create_task(self._send_notifications(),
                                               name="outlast-pg-notify")
        await asyncio.shield(fut)

    async def _send_notifications(self) -> None:
        while self._outbox:
            batch, self._outbox = self._outbox, []
            try:
                if self._pool is None:
                    raise ConnectionError("store is closed")
                await self._pool.execute(
                    "SELECT pg_notify(n.channel, n.payload) "
                    "FROM unnest($1::text[], $2::text[]) AS n(channel, payload)",
                    [c for c, _, _ in batch], [p for _, p, _ in batch])
            except Exception as exc:
                # Hints only: a reader that misses one re-reads the log on its next poll.
                log.warning("could not send %d notifications: %s", len(batch), exc)
            for _, _, fut in batch:
                if not fut.done():
                    fut.set_result(None)

    def _on_notification(self, _con: Any, _pid: int, channel: str, payload: str) -> None:
        notification = decode(channel, payload)  # garbage is logged and dropped there
        if notification is not None:
            self._inbox.put_nowait(notification)

    async def _dispatch_loop(self) -> None:
        # One consumer: hints reach the engine in the order the database sent them.
        while True:
            notification = await self._inbox.get()
            try:
                await self._dispatch(notification)
            except Exception:
                log.exception("handling notification %s failed", notification)

    async def _listen_loop(self) -> None:
        """Keep one connection LISTENing; reconnect when it drops."""
        delay = 0.1
        first = True
        said = False  # a failure said since the last connection: the next go to DEBUG
        while not self._closing:
            con: asyncpg.Connection | None = None
            try:
                con = await connect(self.url,
                                    settings={"application_name": LISTEN_APPLICATION})
                lost = asyncio.Event()
                con.add_termination_listener(lambda _c, lost=lost: lost.set())
                for channel in CHANNELS:
                    await con.add_listener(channel, self._on_notification)
                self._listening.set()
                delay = 0.1
                said = False
                if not first:
                    # Hints sent while we were away are gone: wake the scheduler;
                    # streams re-read the log on their own.
                    log.warning("LISTEN connection restored")
                    self._inbox.put_nowait(WorkAvailable())
                first = False
                while not lost.is_set():
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(lost.wait(), LISTEN_PING)
                    if not lost.is_set():
                        await asyncio.wait_for(con.execute("SELECT 1"), LISTEN_PING)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.log(logging.DEBUG if said else logging.WARNING,
                        "LISTEN connection failed (%s); reconnecting",
                        str(exc) or type(exc).__name__)
                said = True
            finally:
                if con is not None and not con.is_closed():
                    con.terminate()
            if self._closing:
                return
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)

    # -- retention (spec §6) ------------------------------------------------
    async def compact(self, before: float, now: float, max_runs: int,
                      max_events: int) -> Freed | None:
        freed = await SqlStore.compact(self, before, now, max_runs, max_events)
        if freed is not None and freed.events:
            self._compacted = True
        return freed

    async def reclaim(self) -> None:
        """VACUUM the events table now and then, so the space of removed events is
        reused at once instead of after autovacuum's next round (the table stays
        bounded). Plain VACUUM blocks no reader or writer; SKIP_LOCKED: when another
        process is vacuuming it, this one does not wait."""
        if not self._compacted or time.monotonic() - self._vacuumed < VACUUM_EVERY:
            return
        assert self._pool is not None, "store is not open"
        self._compacted = False
        self._vacuumed = time.monotonic()
        async with self._pool.acquire() as con:
            await con.execute("VACUUM (SKIP_LOCKED) events", timeout=MAINTENANCE_TIMEOUT)


class _PgRenewer(LeaseRenewer):
    """Lease renewals on an asyncpg connection of the renewing thread's own, driven by
    an event loop of that thread's own (asyncpg has no blocking interface).

    A renewal that fails in any way (a timeout above all: a partition answers nothing)
    drops its connection, and the next one connects anew: a connection that timed out
    may be dead, and one that is not may still carry the late statement."""

    def __init__(self, url: str, queries: Mapping[str, Query]) -> None:
        self._url = url
        self._q = queries
        self._loop: asyncio.AbstractEventLoop | None = None
        self._con: asyncpg.Connection | None = None

    def renew(self, instance: str, ttl: float, rids: list[int]) -> list[LeaseState]:
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        return self._loop.run_until_complete(self._renew(instance, ttl, rids))

    async def _renew(self, instance: str, ttl: float, rids: list[int]) -> list[LeaseState]:
        # Half the TTL at most: a slow renewal that succeeds still counts (the lease lasts
        # here from when it was sent), and one that cannot leaves time for the loop's.
        limit = min(CONNECT_TIMEOUT, max(1.0, ttl / 2))
        try:
            async with asyncio.timeout(limit):
                if self._con is None or self._con.is_closed():
                    self._con = await connect(self._url, statement_timeout=limit)
                async with self._con.transaction():
                    rows = await _Conn(self._con, self._q).all(
                        "run_renew_leases", instance=instance, rids=json.dumps(rids),
                        expires=time.time() + ttl, ttl=ttl)
        except BaseException:
            if self._con is not None:
                self._con.terminate()
                self._con = None
            raise
        return [LeaseState(r["rid"], r["attempts"], bool(r["cancel_requested"])) for r in rows]

    def close(self) -> None:
        if self._loop is None:
            return
        if self._con is not None:
            with contextlib.suppress(Exception):
                self._loop.run_until_complete(self._con.close(timeout=1))
        self._loop.close()
        self._loop = None
