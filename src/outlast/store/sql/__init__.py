"""Named SQL queries, loaded once per dialect from ``<dialect>/queries.sql``.

A query is introduced by ``-- name: <name>``, followed by a one-line comment
saying what it does, then the statement. Every dialect defines the same names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

_NAME = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)
_PARAM = re.compile(r"(?<!:):(\w+)")


@dataclass(frozen=True)
class Query:
    """One named statement and the parameter names it uses, in order."""

    name: str
    sql: str
    params: tuple[str, ...]


def _split(text: str) -> dict[str, str]:
    parts = _NAME.split(text)
    out: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        lines = [ln for ln in body.strip().splitlines() if not ln.startswith("--")]
        out[name] = "\n".join(lines).strip().rstrip(";")
    return out


@cache
def load_queries(dialect: str) -> dict[str, Query]:
    """Parse ``<dialect>/queries.sql``; ``postgres`` gets ``$n`` placeholders."""
    text = resources.files(__package__).joinpath(dialect, "queries.sql").read_text("utf-8")
    queries: dict[str, Query] = {}
    for name, sql in _split(text).items():
        if dialect == "postgres":
            order: list[str] = []

            def number(m: re.Match[str], order: list[str] = order) -> str:
                if m.group(1) not in order:
                    order.append(m.group(1))
                return f"${order.index(m.group(1)) + 1}"

            sql = _PARAM.sub(number, sql)
            queries[name] = Query(name, sql, tuple(order))
        else:
            queries[name] = Query(name, sql, tuple(dict.fromkeys(_PARAM.findall(sql))))
    return queries


def migrations(dialect: str) -> list[tuple[int, str]]:
    """The dialect's versioned migration scripts, ``NNNN_*.sql``, in order."""
    root = resources.files(__package__).joinpath(dialect)
    found = []
    for entry in root.iterdir():
        m = re.match(r"^(\d{4})_.*\.sql$", entry.name)
        if m:
            found.append((int(m.group(1)), entry.read_text("utf-8")))
    return sorted(found)
