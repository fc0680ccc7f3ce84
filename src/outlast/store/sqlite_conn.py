"""SQLite connections as the SQL store's ``Conn``: named queries over a plain sqlite3
connection (a transaction body run whole in a worker thread) or over an aiosqlite one."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

import aiosqlite

from outlast.store.sql import Query
from outlast.store.sqlconn import Row
from outlast.store.sqlrows import chunks


def bind(query: Query, params: Mapping[str, Any]) -> dict[str, Any]:
    """A query's parameters, each present (None when not given)."""
    return {k: params.get(k) for k in query.params}


def _rows(query: Query, rows: Sequence[Mapping[str, Any]]) -> Sequence[Mapping[str, Any]]:
    """Rows to bind for ``executemany``: as they are when built for this query (a batch
    of rows is a hot path), else with each parameter present."""
    if rows and isinstance(rows[0], dict) and all(k in rows[0] for k in query.params):
        return rows
    return [bind(query, r) for r in rows]


class InlineConn:
    """Named-query adapter over a plain sqlite3 connection, for a transaction body run
    whole in a worker thread: its coroutines never suspend."""

    def __init__(self, db: sqlite3.Connection, queries: Mapping[str, Query]) -> None:
        self._db = db
        self._q = queries

    def _execute(self, name: str, params: Mapping[str, Any]) -> sqlite3.Cursor:
        query = self._q[name]
        return self._db.execute(query.sql, bind(query, params))

    async def one(self, name: str, **params: Any) -> Row | None:
        row = self._execute(name, params).fetchone()
        return None if row is None else dict(row)

    async def all(self, name: str, **params: Any) -> list[Row]:
        return [dict(r) for r in self._execute(name, params).fetchall()]

    async def column(self, name: str, **params: Any) -> list[Any]:
        return [r[0] for r in self._execute(name, params).fetchall()]

    async def run(self, name: str, **params: Any) -> int:
        return self._execute(name, params).rowcount

    async def many(self, name: str, rows: Sequence[Mapping[str, Any]]) -> None:
        query = self._q[name]
        self._db.executemany(query.sql, _rows(query, rows))

    async def rows(self, name: str, rows: Sequence[Sequence[Any]]) -> list[Any]:
        return [r[0] for sql, args in chunks(self._q[name].sql, rows)
                for r in self._db.execute(sql, args).fetchall()]

    async def script(self, sql: str) -> None:
        raise NotImplementedError("scripts run on the aiosqlite connections (migrations)")


class AsyncConn:
    """Named-query adapter over one aiosqlite connection."""

    def __init__(self, db: aiosqlite.Connection, queries: Mapping[str, Query]) -> None:
        self._db = db
        self._q = queries

    def _params(self, name: str, params: Mapping[str, Any]) -> dict[str, Any]:
        return bind(self._q[name], params)

    # One trip to the connection's thread per statement: execute and fetch together, and
    # no separate close (a finished cursor holds nothing). Each trip costs a thread
    # wake-up both ways, which at a model's pace is most of a commit.
    async def one(self, name: str, **params: Any) -> Row | None:
        rows = await self._db.execute_fetchall(self._q[name].sql, self._params(name, params))
        for row in rows:
            return dict(row)
        return None

    async def all(self, name: str, **params: Any) -> list[Row]:
        rows = await self._db.execute_fetchall(self._q[name].sql, self._params(name, params))
        return [dict(r) for r in rows]

    async def column(self, name: str, **params: Any) -> list[Any]:
        """The first column of every row (no row objects: a commit's fence returns one
        row per run)."""
        rows = await self._db.execute_fetchall(self._q[name].sql, self._params(name, params))
        return [r[0] for r in rows]

    async def run(self, name: str, **params: Any) -> int:
        cursor = await self._db.execute(self._q[name].sql, self._params(name, params))
        return cursor.rowcount

    async def many(self, name: str, rows: Sequence[Mapping[str, Any]]) -> None:
        query = self._q[name]
        await self._db.executemany(query.sql, _rows(query, rows))

    async def rows(self, name: str, rows: Sequence[Sequence[Any]]) -> list[Any]:
        return [r[0] for sql, args in chunks(self._q[name].sql, rows)
                for r in await self._db.execute_fetchall(sql, args)]

    async def script(self, sql: str) -> None:
        # Statement by statement inside the caller's transaction (executescript would
        # commit it first); complete_statement knows where a trigger's body ends.
        pending = ""
        for line in sql.splitlines(keepends=True):
            pending += line
            if sqlite3.complete_statement(pending):
                await self._db.execute(pending)
                pending = ""
        if pending.strip() and any(not ln.strip().startswith("--")
                                   for ln in pending.splitlines() if ln.strip()):
            raise ValueError(f"incomplete SQL statement at the end of a script: {pending!r}")
