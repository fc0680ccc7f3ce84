"""Statements over many rows given positionally, for SQLite: the statement's one
``VALUES`` row of ``?`` placeholders is repeated once per row, in chunks whose sizes are
powers of two, so that a handful of statement shapes serve every commit, each prepared
once and kept in the connection's statement cache.

A group commit's rows bound this way cost SQLite no JSON: no array to encode here and
to parse again with ``json_each``, and no event body escaped inside another string.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from functools import cache
from typing import Any

CHUNK = 128
"""The most rows one statement binds (its parameters stay far below SQLite's limit)."""

_ROW = re.compile(r"\(\s*\?(?:\s*,\s*\?)*\s*\)")


@cache
def expanded(sql: str, rows: int) -> str:
    """``sql`` with its placeholder row repeated ``rows`` times."""
    found = _ROW.search(sql)
    if found is None:
        raise ValueError(f"no VALUES row of ? placeholders in {sql!r}")
    return sql[:found.start()] + ", ".join([found.group(0)] * rows) + sql[found.end():]


def chunks(sql: str, rows: Sequence[Sequence[Any]]) -> Iterator[tuple[str, list[Any]]]:
    """Each statement to run for ``rows`` and its flat parameters."""
    done, total = 0, len(rows)
    while done < total:
        n = min(CHUNK, 1 << ((total - done).bit_length() - 1))
        yield expanded(sql, n), [value for row in rows[done:done + n] for value in row]
        done += n
