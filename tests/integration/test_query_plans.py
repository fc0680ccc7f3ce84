"""No SQLite query reads a whole table that grows with the service's history.

A server runs for months: runs, events, threads and messages pile up, and a statement
that scans one of them costs more every day, inside the one writer's transactions when
it writes. Each named query is planned (``EXPLAIN QUERY PLAN``) against the real schema
of a migrated file; a full scan is allowed only through a partial index (whose rows are
the live ones: running runs, pending deliveries) or where listed below, each with why.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

from outlast.store.sql import load_queries
from outlast.store.sqlite import SQLiteStore

# Scans that do not grow with history: of a query's own JSON argument or subquery,
# or of a table holding only work in progress.
EXPECTED_SCANS = {
    "compacting_next": {"SCAN compacting"},  # runs mid-compaction: a handful
    "constructs_close_batch": {"SCAN j VIRTUAL TABLE INDEX 1:", "SCAN b"},  # the rows given
    "events_frames_after": {"SCAN (subquery-1)"},  # the page just read
    "messages_start_batch": {"SCAN r", "SCAN r VIRTUAL TABLE INDEX 1:"},  # the ids given
}
_INDEX = re.compile(r"USING (?:COVERING )?INDEX (\w+)")


def plans(path: Path) -> dict[str, list[str]]:
    con = sqlite3.connect(path)
    try:
        partial = {name for name, sql in con.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL")
            if " WHERE " in sql.upper()}
        out: dict[str, list[str]] = {}
        for name, query in load_queries("sqlite").items():
            sql = re.sub(r"(?<!:):(\w+)", "?", query.sql)
            rows = con.execute("EXPLAIN QUERY PLAN " + sql, [None] * sql.count("?"))
            scans = []
            for row in rows:
                detail = row[3]
                if not detail.startswith("SCAN") or "json_each" in detail:
                    continue
                index = _INDEX.search(detail)
                if index is not None and index.group(1) in partial:
                    continue
                scans.append(detail)
            out[name] = scans
        return out
    finally:
        con.close()


async def test_no_query_scans_a_table_that_grows_with_history(tmp_path: Path) -> None:
    path = tmp_path / "outlast.db"
    store = SQLiteStore(path)
    await store.open()
    await store.close()
    found = plans(path)
    assert len(found) > 50  # every named query was planned
    unexpected = {name: scans for name, scans in found.items()
                  if scans and set(scans) != EXPECTED_SCANS.get(name)}
    assert not unexpected, unexpected
    # The claims are the ones that read every run ever admitted before: each
    # admission and each lease sweep ran one, inside the writer's transaction.
    assert found["run_claim_queued"] == [] and found["run_claim_expired"] == []
