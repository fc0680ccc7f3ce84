"""What each backend's driver says when it cannot write, as outlast's own errors.

A store that cannot write (a full disk, no memory, no connections, a lost
connection) is a condition the service knows: the request that met it gets
``StorageFull`` or ``StoreUnavailable`` with nothing half-stored (its transaction
rolled back), never the driver's exception.
"""

from __future__ import annotations

import errno
import sqlite3
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from outlast.errors import StorageFull, StoreUnavailable

Classify = Callable[[BaseException], StoreUnavailable | None]

# SQLite's primary result codes (the low byte of an extended code).
SQLITE_IOERR, SQLITE_FULL, SQLITE_CANTOPEN = 10, 13, 14


def sqlite_outage(exc: BaseException) -> StoreUnavailable | None:
    """``SQLITE_FULL`` and ENOSPC as ``StorageFull``; ``SQLITE_IOERR`` and
    ``SQLITE_CANTOPEN`` as ``StoreUnavailable``; anything else None."""
    if isinstance(exc, sqlite3.Error):
        code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
        if code == SQLITE_FULL:
            return StorageFull(f"the SQLite store's disk is full ({exc})")
        if code in (SQLITE_IOERR, SQLITE_CANTOPEN):
            return StoreUnavailable(f"the SQLite store cannot write ({exc})")
        return None
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return StorageFull(f"the store's disk is full ({exc.strerror})")
    return None


def postgres_outage(exc: BaseException) -> StoreUnavailable | None:
    """53100 as ``StorageFull``; 53200, 53300, 57P01-03, class 08 and a lost
    connection as ``StoreUnavailable``; anything else None."""
    import asyncpg

    state = getattr(exc, "sqlstate", None)
    if state == "53100":
        return StorageFull(f"the PostgreSQL store's disk is full ({exc})")
    if isinstance(state, str) and (state in ("53200", "53300", "57P01", "57P02", "57P03")
                                   or state.startswith("08")):
        return StoreUnavailable(f"the PostgreSQL store cannot write ({exc})")
    if isinstance(exc, asyncpg.InterfaceError | ConnectionError | TimeoutError):
        return StoreUnavailable(f"the PostgreSQL store is unreachable ({exc})")
    if isinstance(exc, OSError):
        return StoreUnavailable(f"the PostgreSQL store is unreachable ({exc.strerror})")
    return None


Report = Callable[[StoreUnavailable | None], None]
"""Told of each outage met (the error) and, after one, of each write that worked (None)."""


@asynccontextmanager
async def outages(classify: Classify, report: Report | None = None, *,
                  write: bool = False) -> AsyncIterator[None]:
    """Turn the driver's outage errors raised inside into outlast's, telling ``report``;
    a ``write`` that completes tells it the store writes (again)."""
    try:
        yield
    except StoreUnavailable as exc:
        if report is not None:
            report(exc)
        raise
    except Exception as exc:
        found = classify(exc)
        if found is None:
            raise
        if report is not None:
            report(found)
        raise found from exc
    if write and report is not None:
        report(None)
