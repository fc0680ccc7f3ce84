"""The query files and the notification codec: what the SQL stores are built from."""

from __future__ import annotations

import logging

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
    assert load_queries("postgres")["thread_get"].sql.endswith("owner = $1 AND id = $2")
    assert load_queries("sqlite")["thread_get"].params == ("owner", "id")


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
