"""SQLite statements over many positional rows: every row bound once, in order, in
chunks of a few shapes."""

from __future__ import annotations

import sqlite3

import pytest

from outlast.store.sqlrows import CHUNK, chunks, expanded

INSERT = "INSERT INTO t (a, b) VALUES (?, ?)"


@pytest.mark.parametrize("n", [0, 1, 2, 3, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK + 5])
def test_every_row_is_inserted_once_in_order(n: int) -> None:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE t (a INTEGER, b TEXT)")
    rows = [(i, f'{{"delta": "x{i}"}}') for i in range(n)]
    sizes = []
    for sql, args in chunks(INSERT, rows):
        sizes.append(len(args) // 2)
        db.execute(sql, args)
    assert db.execute("SELECT a, b FROM t ORDER BY rowid").fetchall() == rows
    assert all(s <= CHUNK and s & (s - 1) == 0 for s in sizes)  # powers of two


def test_a_statement_without_a_placeholder_row_is_refused() -> None:
    with pytest.raises(ValueError, match="VALUES row"):
        expanded("INSERT INTO t SELECT 1", 2)


def test_the_row_inside_a_cte_is_repeated() -> None:
    sql = expanded("WITH b (x, y) AS (VALUES (?, ?)) SELECT x FROM b", 3)
    assert sql == "WITH b (x, y) AS (VALUES (?, ?), (?, ?), (?, ?)) SELECT x FROM b"
