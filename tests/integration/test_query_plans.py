"""No query reads a whole table that grows with the service's history.

A server runs for months: runs, events, threads and messages pile up, and a statement
that scans one of them costs more every day, inside the one writer's transactions when
it writes. Each named query is planned (``EXPLAIN QUERY PLAN``) against the real schema
of a migrated file; a full scan is allowed only through a partial index (whose rows are
the live ones: running runs, pending deliveries) or where listed below, each with why.
Growing one thread is history too: what asks for a thread's live runs reads only those.
PostgreSQL's planner goes by statistics, so its plans are read from a database grown to
20,000 finished runs on one thread, analyzed.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from outlast.store.sql import load_queries
from outlast.store.sqlite import SQLiteStore

# Scans that do not grow with history: of a query's own JSON argument or subquery,
# or of a table holding only work in progress.
EXPECTED_SCANS = {
    "admission_keys": {"SCAN CONSTANT ROW", "SCAN x"},  # the one row both lookups join to
    "compacting_next": {"SCAN compacting"},  # runs mid-compaction: a handful
    "constructs_close_batch": {"SCAN CONSTANT ROW", "SCAN j", "SCAN b"},  # the rows given
    "events_frames_after": {"SCAN (subquery-1)"},  # the page just read
    "messages_start_batch": {"SCAN r", "SCAN r VIRTUAL TABLE INDEX 1:"},  # the ids given
    "principal_lock": {"SCAN CONSTANT ROW"},  # reads nothing: the writer serializes already
    "runs_fence_append": {"SCAN CONSTANT ROW", "SCAN b"},  # the commit's own rows
    "run_seqs_append": {"SCAN CONSTANT ROW", "SCAN b"},  # the same
}
_INDEX = re.compile(r"USING (?:COVERING )?INDEX (\w+)")


def plans(path: Path) -> tuple[dict[str, list[str]], set[str]]:
    """Each query's plan, line by line, and the names of the partial indexes."""
    con = sqlite3.connect(path)
    try:
        partial = {name for name, sql in con.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL")
            if " WHERE " in sql.upper()}
        out: dict[str, list[str]] = {}
        for name, query in load_queries("sqlite").items():
            sql = re.sub(r"(?<!:):(\w+)", "?", query.sql)
            rows = con.execute("EXPLAIN QUERY PLAN " + sql, [None] * sql.count("?"))
            out[name] = [row[3] for row in rows]
        return out, partial
    finally:
        con.close()


def full_scans(plan: list[str], partial: set[str]) -> list[str]:
    """The steps of a plan that read a whole table (not a partial index, not JSON)."""
    scans = []
    for detail in plan:
        if not detail.startswith("SCAN") or "json_each" in detail:
            continue
        index = _INDEX.search(detail)
        if index is None or index.group(1) not in partial:
            scans.append(detail)
    return scans


async def test_no_query_reads_what_grows_with_history(tmp_path: Path) -> None:
    path = tmp_path / "outlast.db"
    store = SQLiteStore(path)
    await store.open()
    await store.close()
    found, partial = plans(path)
    assert len(found) > 50  # every named query was planned
    scans = {name: full_scans(plan, partial) for name, plan in found.items()}
    unexpected = {name: s for name, s in scans.items()
                  if s and set(s) != EXPECTED_SCANS.get(name)}
    assert not unexpected, unexpected
    # The claims are the ones that read every run ever admitted before: each
    # admission and each lease sweep ran one, inside the writer's transaction.
    assert scans["run_claim_queued"] == [] and scans["run_claim_expired"] == []
    # A thread's live runs, asked for by admission, claims and every run's end, come
    # from the index of live runs, not from every run of the thread.
    for name in ("runs_active_for_thread", "run_claim_queued", "thread_refresh_status"):
        lookups = [d for d in found[name] if "runs_thread" in d]
        assert lookups and "runs_thread_active" in lookups[0], (name, found[name])
    # And a thread's pending interrupts, from the index of pending ones, not from every
    # interrupt the thread raised (an agent may ask for an approval every turn).
    for name in ("interrupts_pending_for_thread", "thread_refresh_status"):
        lookups = [d for d in found[name] if " interrupts" in d or " i " in d]
        assert lookups and all("interrupts_pending" in d for d in lookups), \
            (name, found[name])


# What each question a turn asks must be answered from, on PostgreSQL.
POSTGRES_LOOKUPS = {
    "run_claim_queued": ("runs_active", "runs_thread_active"),
    "runs_active_for_thread": ("runs_thread_active",),
    "thread_refresh_status": ("runs_thread_active", "interrupts_pending"),
    "interrupts_pending_for_thread": ("interrupts_pending",),
}
_SAMPLE = {"int8": 1, "int4": 1, "float8": 1.0, "numeric": 1, "text": "x", "bool": False}


@pytest.mark.postgres
async def test_postgres_answers_a_turn_from_the_live_rows(pg_url: str) -> None:
    import asyncpg

    con = await asyncpg.connect(pg_url)
    try:
        await con.execute(
            "INSERT INTO threads (principal, id, created_at, updated_at) VALUES ('o', 't', 1, 1)")
        await con.execute(
            "INSERT INTO runs (principal, id, tid, thread_id, agent, status, idempotency_key, "
            "fingerprint, input, options, created_at) "
            "SELECT 'o', 'r' || g, (SELECT tid FROM threads), 't', 'demo', 'succeeded', "
            "'r' || g, 'f', repeat('x', 2000), '{}', 1 FROM generate_series(1, 20000) g")
        await con.execute(
            "INSERT INTO interrupts (tid, id, rid, run_id, body, status) "
            "SELECT tid, 'i' || rid, rid, id, '{}', 'resolved' FROM runs")
        await con.execute("ANALYZE")
        queries = load_queries("postgres")
        for name, indexes in POSTGRES_LOOKUPS.items():
            statement = await con.prepare("EXPLAIN " + queries[name].sql)  # $1, $2, ...
            args = [_SAMPLE.get(p.name) for p in statement.get_parameters()]
            plan = "\n".join(r[0] for r in await statement.fetch(*args))
            assert "Seq Scan on runs" not in plan and "Seq Scan on interrupts" not in plan, \
                (name, plan)
            for index in indexes:
                assert f"using {index} on" in plan, (name, index, plan)
    finally:
        await con.close()
