"""The query files and the notification codec: what the SQL stores are built from."""

from __future__ import annotations

import ast
import logging
from pathlib import Path

import pytest

from outlast.store.notifications import (
    CancelRequested,
    EventsCommitted,
    WorkAvailable,
    decode,
    encode,
)
from outlast.store.sql import DIALECTS, QueryFileError, load_queries, merge_queries

SHARED = """-- header
-- name: a
-- Query a.
SELECT 1;

-- name: b
-- Query b.
SELECT 2;
"""


def test_every_dialect_has_the_same_queries_and_the_shared_ones_are_written_once() -> None:
    names = {d: set(load_queries(d)) for d in DIALECTS}
    assert names["sqlite"] == names["postgres"]
    assert load_queries("postgres")["thread_get"].sql.endswith("principal = $1 AND id = $2")
    assert load_queries("sqlite")["thread_get"].params == ("principal", "id")


STORE = Path(__file__).resolve().parents[2] / "src" / "outlast" / "store"


def names_in_code(root: Path) -> set[str]:
    """Every string literal of the store's code: a query runs by its name, spelled out."""
    return {node.value for path in root.rglob("*.py")
            for node in ast.walk(ast.parse(path.read_text(), str(path)))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)}


def unused_queries(defined: dict[str, set[str]], used: set[str]) -> list[str]:
    """A line per named query no code runs, saying which files to remove it from."""
    return [f"no code runs the query {name!r}: remove it from "
            + ", ".join(f"src/outlast/store/sql/{where}" for where in sorted(files))
            for name, files in sorted(defined.items()) if name not in used]


def defined_queries() -> dict[str, set[str]]:
    """Each query name, with the files of sql/ that define it."""
    files = {"queries.sql": STORE / "sql" / "queries.sql",
             **{f"{d}/queries.sql": STORE / "sql" / d / "queries.sql" for d in DIALECTS}}
    found: dict[str, set[str]] = {}
    for where, path in files.items():
        for line in path.read_text().splitlines():
            if line.startswith("-- name: "):
                found.setdefault(line.removeprefix("-- name: ").strip(), set()).add(where)
    return found


def test_every_named_query_is_run_by_the_store() -> None:
    defined = defined_queries()
    assert set(defined) == set(load_queries("sqlite")), "the check reads the files wrong"
    problems = unused_queries(defined, names_in_code(STORE))
    assert not problems, "\n".join(problems)


def test_an_unused_query_is_named_with_its_files() -> None:
    assert unused_queries({"a": {"queries.sql"}, "b": {"sqlite/queries.sql",
                                                       "postgres/queries.sql"}}, {"a"}) == [
        "no code runs the query 'b': remove it from src/outlast/store/sql/postgres/queries.sql,"
        " src/outlast/store/sql/sqlite/queries.sql"]


def test_an_override_wins_over_the_shared_query() -> None:
    merged = merge_queries(SHARED, {"x": "-- name: b\n-- Its own b.\nSELECT 3;\n",
                                    "y": "-- name: b\n-- Another b.\nSELECT 4;\n"})
    assert merged["x"] == {"a": "SELECT 1", "b": "SELECT 3"}
    assert merged["y"]["b"] == "SELECT 4"


@pytest.mark.parametrize(("overrides", "message"), [
    ({"x": "-- name: c\n-- Only here.\nSELECT 3;\n", "y": ""}, "dialect y lacks the queries c"),
    ({"x": "-- name: b\n-- Same.\nSELECT   2;\n", "y": ""}, "repeats the shared query 'b'"),
    ({"x": "-- name: c\n-- 1.\nSELECT 3;\n-- name: c\n-- 2.\nSELECT 4;\n", "y": ""},
     "defined twice"),
])
def test_inconsistent_query_files_fail_loudly(overrides: dict[str, str], message: str) -> None:
    with pytest.raises(QueryFileError, match=message):
        merge_queries(SHARED, overrides)


def test_notifications_survive_the_wire() -> None:
    for n in (EventsCommitted(12, 345, True), EventsCommitted(1, 0, False),
              CancelRequested(9), WorkAvailable()):
        assert decode(*encode(n)) == n
    assert encode(EventsCommitted(7, 3, False)) == ("outlast_events", "7:3:0")


@pytest.mark.parametrize(("channel", "payload"), [
    ("outlast_events", ""), ("outlast_events", "1:2"), ("outlast_events", "1:2:3"),
    ("outlast_events", "a:b:c"), ("outlast_events", "1:-2:0"), ("outlast_events", "1:2:0:4"),
    ("outlast_cancel", ""), ("outlast_cancel", "+7"), ("outlast_cancel", "٣"),
    ("outlast_cancel", "7 "), ("elsewhere", "1"),
])
def test_garbage_notifications_are_logged_and_dropped(
        channel: str, payload: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="outlast.store.notifications"):
        assert decode(channel, payload) is None
    assert "dropping" in caplog.text
