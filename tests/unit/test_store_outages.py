"""What each driver says when its store cannot write, as outlast's two errors (the
full-disk e2e tests meet them for real; this names every case the code maps)."""

from __future__ import annotations

import errno
import sqlite3

import asyncpg
import pytest

from outlast.errors import StorageFull, StoreUnavailable
from outlast.store.outage import outages, postgres_outage, sqlite_outage


def sqlite_error(code: int, message: str) -> sqlite3.Error:
    exc = sqlite3.OperationalError(message)
    exc.sqlite_errorcode = code  # type: ignore[attr-defined]
    return exc


@pytest.mark.parametrize(("exc", "kind"), [
    (sqlite_error(13, "database or disk is full"), StorageFull),
    (sqlite_error(13 | (1 << 8), "extended full"), StorageFull),
    (sqlite_error(10, "disk I/O error"), StoreUnavailable),
    (sqlite_error(10 | (4 << 8), "disk I/O error (short read)"), StoreUnavailable),
    (sqlite_error(14, "unable to open database file"), StoreUnavailable),
    (OSError(errno.ENOSPC, "No space left on device"), StorageFull),
    (sqlite_error(19, "UNIQUE constraint failed"), None),
    (sqlite_error(5, "database is locked"), None),
    (ValueError("a bug"), None),
])
def test_sqlite(exc: BaseException, kind: type[StoreUnavailable] | None) -> None:
    found = sqlite_outage(exc)
    assert (type(found) if found is not None else None) is kind


@pytest.mark.parametrize(("exc", "kind"), [
    (asyncpg.DiskFullError("could not extend file"), StorageFull),
    (asyncpg.OutOfMemoryError("out of memory"), StoreUnavailable),
    (asyncpg.TooManyConnectionsError("too many clients"), StoreUnavailable),
    (asyncpg.AdminShutdownError("terminating connection"), StoreUnavailable),
    (asyncpg.CannotConnectNowError("the database system is starting up"), StoreUnavailable),
    (asyncpg.ConnectionDoesNotExistError("connection was closed"), StoreUnavailable),
    (ConnectionRefusedError(errno.ECONNREFUSED, "refused"), StoreUnavailable),
    (asyncpg.UniqueViolationError("duplicate key"), None),
    (asyncpg.SerializationError("could not serialize"), None),
    (ValueError("a bug"), None),
])
def test_postgres(exc: BaseException, kind: type[StoreUnavailable] | None) -> None:
    found = postgres_outage(exc)
    assert (type(found) if found is not None else None) is kind


async def test_outages_report_and_translate() -> None:
    told: list[object] = []
    with pytest.raises(StorageFull) as raised:
        async with outages(sqlite_outage, told.append, write=True):
            raise sqlite_error(13, "database or disk is full")
    assert isinstance(raised.value.__cause__, sqlite3.OperationalError)
    async with outages(sqlite_outage, told.append, write=True):
        pass
    async with outages(sqlite_outage, told.append):  # a read proves nothing of writes
        pass
    with pytest.raises(ValueError):  # not an outage: untouched, not reported
        async with outages(sqlite_outage, told.append, write=True):
            raise ValueError("a bug")
    assert [type(t) if t is not None else None for t in told] == [StorageFull, None]
