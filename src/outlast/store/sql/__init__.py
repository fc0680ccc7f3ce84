"""Named SQL queries and versioned migrations, per dialect.

``queries.sql`` holds every query that reads the same in all dialects;
``<dialect>/queries.sql`` holds only the ones that truly differ (row locks,
aggregate syntax), and wins over the shared file. A query is introduced by
``-- name: <name>``, followed by a one-line comment saying what it does, then
the statement. Loading checks that every dialect ends up with the same names,
so a query missing from one dialect fails at startup, not on first use.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources

DIALECTS = ("sqlite", "postgres")

_NAME = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)
_PARAM = re.compile(r"(?<!:):(\w+)")


class QueryFileError(RuntimeError):
    """The query files are inconsistent (a defect of the package, found at startup)."""


@dataclass(frozen=True)
class Query:
    """One named statement and the parameter names it uses, in order."""

    name: str
    sql: str
    params: tuple[str, ...]


def _read(*parts: str) -> str:
    return resources.files(__package__).joinpath(*parts).read_text("utf-8")


def _split(text: str, where: str) -> dict[str, str]:
    parts = _NAME.split(text)
    out: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        if name in out:
            raise QueryFileError(f"query {name!r} is defined twice in {where}")
        lines = [ln for ln in body.strip().splitlines() if not ln.startswith("--")]
        out[name] = "\n".join(lines).strip().rstrip(";")
    return out


def _normal(sql: str) -> str:
    return " ".join(sql.split())


@cache
def _texts() -> dict[str, dict[str, str]]:
    return merge_queries(_read("queries.sql"),
                         {dialect: _read(dialect, "queries.sql") for dialect in DIALECTS})


def merge_queries(shared: str, overrides: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """Every dialect's query texts: the shared file's, its own file's winning; raises
    QueryFileError when a dialect lacks a name another has, a name is defined twice
    in one file, or an override merely repeats the shared query."""
    common = _split(shared, "queries.sql")
    merged: dict[str, dict[str, str]] = {}
    for dialect, text in overrides.items():
        where = f"{dialect}/queries.sql"
        own = _split(text, where)
        for name, sql in own.items():
            # One declaration per fact: a copy of a shared query would drift.
            if name in common and _normal(common[name]) == _normal(sql):
                raise QueryFileError(f"{where} repeats the shared query {name!r} unchanged")
        merged[dialect] = {**common, **own}
    names = set().union(*(q.keys() for q in merged.values()))
    for dialect, queries in merged.items():
        missing = sorted(names - queries.keys())
        if missing:
            raise QueryFileError(f"dialect {dialect} lacks the queries {', '.join(missing)}")
    return merged


def _numbered(name: str, sql: str) -> Query:
    order: list[str] = []

    def number(m: re.Match[str]) -> str:
        if m.group(1) not in order:
            order.append(m.group(1))
        return f"${order.index(m.group(1)) + 1}"

    return Query(name, _PARAM.sub(number, sql), tuple(order))


@cache
def load_queries(dialect: str) -> dict[str, Query]:
    """The dialect's queries (shared ones merged with its overrides); ``postgres``
    gets ``$n`` placeholders, SQLite keeps ``:name``."""
    if dialect not in DIALECTS:
        raise QueryFileError(f"unknown SQL dialect {dialect!r}")
    texts = _texts()[dialect]
    if dialect == "postgres":
        return {name: _numbered(name, sql) for name, sql in texts.items()}
    return {name: Query(name, sql, tuple(dict.fromkeys(_PARAM.findall(sql))))
            for name, sql in texts.items()}


def migrations(dialect: str) -> list[tuple[int, str]]:
    """The dialect's versioned migration scripts, ``NNNN_*.sql``, in order."""
    root = resources.files(__package__).joinpath(dialect)
    found = []
    for entry in root.iterdir():
        m = re.match(r"^(\d{4})_.*\.sql$", entry.name)
        if m:
            found.append((int(m.group(1)), entry.read_text("utf-8")))
    return sorted(found)
