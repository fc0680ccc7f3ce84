"""The embedded store: one SQLite file in WAL mode, owned by one process.

An exclusive lock on the data directory proves that no other process uses the
file, so runs leased by a predecessor can be taken over at once (G8).
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import logging
import os
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiosqlite
import anyio

from outlast.errors import OutlastError
from outlast.store.base import LeaseRenewer
from outlast.store.notifications import Notification
from outlast.store.outage import outages, sqlite_outage
from outlast.store.records import AdmitRequest, AdmitResult, LeaseState
from outlast.store.sqlconn import UniqueViolation
from outlast.store.sqlite_conn import AsyncConn, InlineConn
from outlast.store.sqlite_fence import KnownLeases
from outlast.store.sqlite_lock import WriteLock
from outlast.store.sqlstore import Body, SqlStore, T

log = logging.getLogger("outlast.store.sqlite")

# Retention (spec §6). Free pages handed back to the file system per reclaim() (4 KiB
# each): few enough that a reclaim holds the writer only briefly.
RECLAIM_PAGES = 512
# The -wal file is cut back to this after a checkpoint: a burst of writes must not
# leave it large for good.
WAL_LIMIT = 16 << 20
# At most this many admissions commit in one transaction (``SQLiteStore.admit``): one
# commit for a burst of them, yet a bound on how long they hold the writer.
ADMISSIONS_AT_ONCE = 32
# A file written before incremental vacuum is converted at open (one VACUUM, which
# rewrites it) only up to this size; a larger one says how to convert it.
CONVERT_LIMIT = 256 << 20


class DataDirLocked(OutlastError):
    """Another process already serves this data directory."""

    code = "data_dir_locked"


async def _settle(db: aiosqlite.Connection) -> None:
    """End any open transaction, even while the caller is being cancelled: a
    connection must go back to its pool clean (a cancelled SSE reader, say)."""
    with anyio.CancelScope(shield=True):
        # Not ``if db.in_transaction``: a cancelled caller's BEGIN may still wait in the
        # connection's queue, not yet run. rollback() is queued behind it, so it ends
        # that transaction too (and does nothing when none is open).
        await db.rollback()


def _inline(coro: Coroutine[Any, Any, T]) -> T:
    """The result of a coroutine that finishes without suspending (a transaction body
    over ``InlineConn``), run here and now."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coro.close()
    raise RuntimeError("a transaction body run in a worker thread awaited something "
                       "other than its connection")


async def _in_thread(pool: ThreadPoolExecutor, release: Callable[[], None],
                     fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` in ``pool``; ``release`` runs once it has returned. A caller
    cancelled meanwhile (a client gone) returns at once, while the thread finishes
    its transaction; the connection (and the write lock) are its until then."""
    try:
        future = asyncio.get_running_loop().run_in_executor(pool, fn, *args)
    except BaseException:
        release()
        raise

    def done(f: asyncio.Future[T]) -> None:
        release()
        if not f.cancelled():
            f.exception()  # seen: a cancelled caller's failure is not "never retrieved"

    future.add_done_callback(done)
    return await asyncio.shield(future)


class SQLiteStore(SqlStore):
    """Store over a SQLite file; one writer connection, a few readers."""

    def __init__(self, path: str | Path, *, synchronous: str = "FULL", readers: int = 3) -> None:
        super().__init__("sqlite")
        self.path = Path(path)
        self.synchronous = synchronous
        self._n_readers = readers
        self._writer: aiosqlite.Connection | None = None
        self._write_lock = WriteLock()
        self._readers: asyncio.Queue[aiosqlite.Connection] = asyncio.Queue()
        self._all_readers: list[aiosqlite.Connection] = []
        self._lock_fd: int | None = None
        # Transactions run whole in worker threads (hot paths: commits, admission, the
        # reads that start a stream); the aiosqlite connections serve the rest.
        self._inline_writer: sqlite3.Connection | None = None
        self._writes: ThreadPoolExecutor | None = None
        self._inline_readers: asyncio.Queue[sqlite3.Connection] = asyncio.Queue()
        self._all_inline_readers: list[sqlite3.Connection] = []
        self._reads: ThreadPoolExecutor | None = None
        # Admissions waiting for the write connection together, and their outcomes.
        self._admissions: list[tuple[AdmitRequest, asyncio.Future[AdmitResult]]] = []
        self._admitting: set[asyncio.Task[None]] = set()
        self._leases = KnownLeases()  # the write connection's thread's, under the lock

    def lease_renewer(self) -> LeaseRenewer:
        return _SqliteRenewer(self)

    @property
    def exclusive(self) -> bool:
        """True: holding the data-directory lock proves every other lease holder dead."""
        return True

    def _pragmas(self) -> list[str]:
        """Every connection's settings. auto_vacuum comes before journal_mode, which
        writes a new file's first page: a new file takes incremental vacuum only then
        (for an older one see _convert_vacuum)."""
        return ["PRAGMA auto_vacuum=INCREMENTAL", "PRAGMA journal_mode=WAL",
                f"PRAGMA journal_size_limit={WAL_LIMIT}",
                f"PRAGMA synchronous={self.synchronous}", "PRAGMA foreign_keys=ON",
                "PRAGMA busy_timeout=5000"]

    async def _connect(self) -> aiosqlite.Connection:
        db = await aiosqlite.connect(self.path, isolation_level=None)
        db.row_factory = sqlite3.Row
        for pragma in self._pragmas():
            await db.execute(pragma)
        return db

    def _connect_inline(self) -> sqlite3.Connection:
        """A connection for transactions run whole in a worker thread (``_in_write``,
        ``_in_read``); one thread uses it at a time."""
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        db.row_factory = sqlite3.Row
        for pragma in self._pragmas():
            db.execute(pragma)
        return db

    async def _in_write(self, body: Body[T], *, batch: bool = False) -> T:
        # The whole transaction in one trip to a thread: on a busy event loop every await
        # waits a loop iteration, and a commit awaiting a statement at a time took tens
        # of milliseconds under a few hundred runs at a model's pace.
        assert self._inline_writer is not None and self._writes is not None, \
            "store is not open"
        await self._write_lock.acquire(batch=batch)
        async with outages(sqlite_outage, self.report_outage, write=True):
            return await _in_thread(self._writes, self._write_lock.release,
                                    self._write_here, self._inline_writer, body, batch)

    def _known_leases(self) -> set[tuple[int, str, int]]:
        return self._leases.held

    def _write_here(self, db: sqlite3.Connection, body: Body[T], batch: bool) -> T:
        db.execute("BEGIN IMMEDIATE")
        try:
            self._leases.begin(db, batch)
            result = _inline(body(InlineConn(db, self._queries)))
            db.execute("COMMIT")
        except sqlite3.IntegrityError as exc:
            db.execute("ROLLBACK")
            raise UniqueViolation(str(exc)) from exc
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        return result

    async def admit(self, req: AdmitRequest) -> AdmitResult:
        """Admissions that arrive while the write connection is busy commit together, in
        one transaction and one trip to its thread, each in a savepoint of its own (one
        refused rolls back alone). Ten runs admitted at once behind busy writers
        otherwise each waited out a loop iteration at every hand-over of the lock."""
        fut: asyncio.Future[AdmitResult] = asyncio.get_running_loop().create_future()
        self._admissions.append((req, fut))
        if len(self._admissions) == 1:  # the first of a group: it takes the lock for all
            self._start_group()
        try:
            async with outages(sqlite_outage, self.report_outage, write=True):
                return await fut
        except UniqueViolation:
            return await super().admit(req)  # one at a time, with the retries of G3

    def _start_group(self) -> None:
        task = asyncio.create_task(self._admit_group(), name="outlast-admissions")
        self._admitting.add(task)
        task.add_done_callback(self._admitting.discard)

    async def _admit_group(self) -> None:
        assert self._inline_writer is not None and self._writes is not None, \
            "store is not open"
        try:
            await self._write_lock.acquire()
        except BaseException as exc:
            group, self._admissions = self._admissions, []
            for _, fut in group:
                if not fut.done():
                    fut.set_exception(exc)
            raise
        # A bounded group: the runs writing wait for it, and so do its own first events.
        group = self._admissions[:ADMISSIONS_AT_ONCE]
        self._admissions = self._admissions[ADMISSIONS_AT_ONCE:]
        if self._admissions:
            self._start_group()  # the rest, and whoever comes meanwhile, go next
        try:
            outcomes = await _in_thread(self._writes, self._write_lock.release,
                                        self._admit_here, self._inline_writer,
                                        [req for req, _ in group])
        except BaseException as exc:
            outcomes = [exc] * len(group)
        for (_, fut), outcome in zip(group, outcomes, strict=True):
            if fut.done():
                continue  # its caller was cancelled; the admission stands (G1)
            if isinstance(outcome, BaseException):
                fut.set_exception(outcome)
            else:
                fut.set_result(outcome)

    def _admit_here(self, db: sqlite3.Connection,
                    reqs: list[AdmitRequest]) -> list[AdmitResult | BaseException]:
        conn = InlineConn(db, self._queries)
        outcomes: list[AdmitResult | BaseException] = []
        db.execute("BEGIN IMMEDIATE")
        self._leases.forget()
        try:
            for req in reqs:
                db.execute("SAVEPOINT admission")
                try:
                    outcomes.append(_inline(self._admit(conn, req)))
                except Exception as exc:
                    db.execute("ROLLBACK TO admission")
                    outcomes.append(UniqueViolation(str(exc))
                                    if isinstance(exc, sqlite3.IntegrityError) else exc)
                db.execute("RELEASE admission")
            # A refused request changes nothing, not even the file's pages.
            db.execute("COMMIT" if any(isinstance(o, AdmitResult) for o in outcomes)
                       else "ROLLBACK")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        return outcomes

    async def _in_read(self, body: Body[T]) -> T:
        assert self._reads is not None, "store is not open"
        db = await self._inline_readers.get()
        async with outages(sqlite_outage):
            return await _in_thread(self._reads, lambda: self._inline_readers.put_nowait(db),
                                    self._read_here, db, body)

    def _read_here(self, db: sqlite3.Connection, body: Body[T]) -> T:
        db.execute("BEGIN")  # one snapshot for every statement of the body (G5)
        try:
            return _inline(body(InlineConn(db, self._queries)))
        finally:
            db.execute("ROLLBACK")

    def _take_dir_lock(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path.with_suffix(".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise DataDirLocked(
                f"another outlast process is using {self.path.parent}; "
                "stop it or choose another --data-dir (use PostgreSQL for several processes)"
            ) from None
        self._lock_fd = fd

    async def open(self) -> None:
        self._take_dir_lock()
        self._writer = await self._connect()
        await self._migrate()
        await self._convert_vacuum(self._writer)
        self._writes = ThreadPoolExecutor(1, thread_name_prefix="outlast-sqlite-write")
        self._inline_writer = self._connect_inline()
        self._reads = ThreadPoolExecutor(self._n_readers,
                                         thread_name_prefix="outlast-sqlite-read")
        for _ in range(self._n_readers):
            inline = self._connect_inline()
            self._all_inline_readers.append(inline)
            self._inline_readers.put_nowait(inline)
        for _ in range(self._n_readers):
            reader = await self._connect()
            self._all_readers.append(reader)
            self._readers.put_nowait(reader)

    async def _convert_vacuum(self, db: aiosqlite.Connection) -> None:
        """Give a file made before retention reclaimed space incremental vacuum (spec §6:
        the database stays bounded). That takes one VACUUM, which rewrites the file:
        done at open for a small file, before any reader exists; a large one keeps
        reusing its free pages, and the log says how to convert it."""
        async with db.execute("PRAGMA auto_vacuum") as cur:
            row = await cur.fetchone()
        if row is None or row[0] != 0:
            return
        size = self.path.stat().st_size
        if size > CONVERT_LIMIT:
            log.warning("%s does not return freed space to the file system (made before "
                        "incremental vacuum); to convert it, stop the server and run: "
                        "sqlite3 %s 'PRAGMA auto_vacuum=INCREMENTAL; VACUUM'",
                        self.path, self.path)
            return
        log.info("converting %s to incremental vacuum (%d bytes)", self.path, size)
        await db.executescript("PRAGMA auto_vacuum=INCREMENTAL; VACUUM")

    async def reclaim(self) -> None:
        """Hand up to RECLAIM_PAGES free pages back to the file system. The WAL needs
        nothing here: the writer's automatic checkpoints copy it back, and
        journal_size_limit cuts the file down after them (an explicit checkpoint under
        the write lock would hold live runs' commits up for its fsync)."""
        assert self._writer is not None, "store is not open"
        async with self._write_lock:
            db = self._writer
            if db.in_transaction:
                await _settle(db)
            with anyio.CancelScope(shield=True):
                # executescript: the pragma frees one page per step, and only
                # sqlite3_exec steps it to the end.
                await db.executescript(f"PRAGMA incremental_vacuum({RECLAIM_PAGES})")

    @asynccontextmanager
    async def _migration_lock(self) -> AsyncIterator[None]:
        # The data-directory lock, taken in open(), already keeps every other process out.
        yield

    async def close(self) -> None:
        for db in self._all_readers:
            await db.close()
        self._all_readers.clear()
        if self._inline_writer is not None and self._writes is not None:
            async with self._write_lock:
                await asyncio.get_running_loop().run_in_executor(
                    self._writes, self._inline_writer.close)
            self._writes.shutdown()
            self._inline_writer = self._writes = None
        if self._reads is not None:
            self._reads.shutdown()  # waits for reads in flight
            for reader in self._all_inline_readers:
                reader.close()
            self._all_inline_readers.clear()
            self._inline_readers = asyncio.Queue()
            self._reads = None
        if self._writer is not None:
            await self._writer.close()
            self._writer = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    async def ping(self) -> None:
        async with self._read() as c:
            await c.one("schema_version_get")

    @asynccontextmanager
    async def _write(self) -> AsyncIterator[AsyncConn]:
        assert self._writer is not None, "store is not open"
        async with outages(sqlite_outage, self.report_outage, write=True), self._write_lock:
            db = self._writer
            if db.in_transaction:
                await _settle(db)
            try:
                # Inside the try: a caller cancelled while its BEGIN waits in the
                # connection's queue still settles what that BEGIN starts.
                await db.execute("BEGIN IMMEDIATE")
                yield AsyncConn(db, self._queries)
            except sqlite3.IntegrityError as exc:
                await _settle(db)
                raise UniqueViolation(str(exc)) from exc
            except BaseException:
                await _settle(db)
                raise
            else:
                with anyio.CancelScope(shield=True):
                    try:
                        await db.execute("COMMIT")
                    except sqlite3.IntegrityError as exc:
                        await db.execute("ROLLBACK")
                        raise UniqueViolation(str(exc)) from exc

    @asynccontextmanager
    async def _read(self) -> AsyncIterator[AsyncConn]:
        async with outages(sqlite_outage):
            async with self._read_here_async() as c:
                yield c

    @asynccontextmanager
    async def _read_here_async(self) -> AsyncIterator[AsyncConn]:
        db = await self._readers.get()
        try:
            if db.in_transaction:
                await _settle(db)
            try:
                await db.execute("BEGIN")  # inside the try, as in _write
                yield AsyncConn(db, self._queries)
            finally:
                await _settle(db)
        finally:
            self._readers.put_nowait(db)

    async def notify(self, notification: Notification) -> None:
        # One process per file (the directory lock): in-process delivery is all.
        await self._dispatch(notification)


class _SqliteRenewer(LeaseRenewer):
    """Lease renewals on a sqlite3 connection of the renewing thread's own: a write
    transaction like any other, which waits its turn on the file's write lock."""

    def __init__(self, store: SQLiteStore) -> None:
        self._store = store
        self._db: sqlite3.Connection | None = None

    def renew(self, instance: str, ttl: float, rids: list[int]) -> list[LeaseState]:
        if self._db is None:
            self._db = self._store._connect_inline()
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            rows = _inline(InlineConn(db, self._store._queries).all(
                "run_renew_leases", instance=instance, rids=json.dumps(rids),
                expires=time.time() + ttl))
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return [LeaseState(r["rid"], r["attempts"], bool(r["cancel_requested"])) for r in rows]

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
