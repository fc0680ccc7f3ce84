"""Both backends end up with one schema: after the migrations, SQLite's and
PostgreSQL's catalogs list the same tables, columns, indexes and keys.

Read from the real catalogs of a real SQLite file and the throwaway PostgreSQL
database: the DDL files differ legitimately (types, sequences), what they define
must not drift apart.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from outlast.store.postgres import PostgresStore
from outlast.store.sqlite import SQLiteStore

# Declared types, loosely: SQLite's affinity against PostgreSQL's information_schema.
SQLITE_TYPES = {"INTEGER": "integer", "REAL": "real", "DOUBLE PRECISION": "real",
                "TEXT": "text"}
POSTGRES_TYPES = {"integer": "integer", "bigint": "integer", "double precision": "real",
                  "text": "text"}

Schema = dict[str, Any]


def sqlite_schema(path: Path) -> Schema:
    con = sqlite3.connect(path)
    try:
        tables = [r[0] for r in con.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' "
            "AND name NOT LIKE 'sqlite_%' ORDER BY name")]
        columns: dict[str, dict[str, tuple[str, bool]]] = {}
        indexes: dict[str, tuple[str, tuple[str, ...], bool, bool]] = {}
        keys: set[tuple[str, str, tuple[str, ...]]] = set()
        for table in tables:
            info = con.execute(
                "SELECT name, type, \"notnull\", pk FROM pragma_table_info(?)", (table,))
            rows = list(info)
            # An INTEGER PRIMARY KEY is never NULL though the pragma says nullable.
            columns[table] = {name: (SQLITE_TYPES[kind.upper()], bool(notnull or pk))
                              for name, kind, notnull, pk in rows}
            pk = tuple(name for name, _, _, p in sorted(rows, key=lambda r: r[3]) if p)
            if pk:
                keys.add((table, "primary", pk))
            for name, unique, origin, partial in con.execute(
                    "SELECT name, \"unique\", origin, partial FROM pragma_index_list(?)",
                    (table,)):
                cols = tuple(r[0] for r in con.execute(
                    "SELECT name FROM pragma_index_info(?) ORDER BY seqno", (name,)))
                if origin == "c":
                    indexes[name] = (table, cols, bool(unique), bool(partial))
                elif origin == "u":
                    keys.add((table, "unique", cols))
        views = {name: tuple(r[0] for r in con.execute(
                     "SELECT name FROM pragma_table_info(?) ORDER BY cid", (name,)))
                 for (name,) in con.execute(
                     "SELECT name FROM sqlite_master WHERE type = 'view' ORDER BY name")}
        return {"tables": tables, "columns": columns, "indexes": indexes, "keys": keys,
                "views": views}
    finally:
        con.close()


async def postgres_schema(url: str) -> Schema:
    import asyncpg

    con = await asyncpg.connect(url)
    try:
        tables = [r["table_name"] for r in await con.fetch(
            "SELECT table_name FROM information_schema.tables "
            "WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' "
            "ORDER BY table_name")]
        columns: dict[str, dict[str, tuple[str, bool]]] = {t: {} for t in tables}
        views: dict[str, tuple[str, ...]] = {}
        for r in await con.fetch(
                "SELECT table_name, column_name, data_type, is_nullable "
                "FROM information_schema.columns WHERE table_schema = current_schema() "
                "ORDER BY table_name, ordinal_position"):
            if r["table_name"] in columns:
                columns[r["table_name"]][r["column_name"]] = (
                    POSTGRES_TYPES[r["data_type"]], r["is_nullable"] == "NO")
            else:  # a view's
                views[r["table_name"]] = (*views.get(r["table_name"], ()), r["column_name"])
        indexes: dict[str, tuple[str, tuple[str, ...], bool, bool]] = {}
        keys: set[tuple[str, str, tuple[str, ...]]] = set()
        for r in await con.fetch(
                "SELECT i.relname AS name, t.relname AS table, x.indisunique AS unique, "
                "x.indpred IS NOT NULL AS partial, "
                "(SELECT array_agg(a.attname ORDER BY k.ord) "
                " FROM unnest(x.indkey) WITH ORDINALITY AS k(attnum, ord) "
                " JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum) AS cols, "
                "c.contype::text AS constraint "
                "FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid "
                "JOIN pg_class t ON t.oid = x.indrelid "
                "JOIN pg_namespace n ON n.oid = t.relnamespace "
                "LEFT JOIN pg_constraint c ON c.conindid = x.indexrelid AND c.conrelid = t.oid "
                "AND c.contype IN ('p', 'u') "
                "WHERE n.nspname = current_schema()"):
            cols = tuple(r["cols"])
            if r["constraint"] == "p":
                keys.add((r["table"], "primary", cols))
            elif r["constraint"] == "u":
                keys.add((r["table"], "unique", cols))
            else:
                indexes[r["name"]] = (r["table"], cols, r["unique"], r["partial"])
        return {"tables": tables, "columns": columns, "indexes": indexes, "keys": keys,
                "views": views}
    finally:
        await con.close()


def sqlite_at_version(path: Path, version: int) -> sqlite3.Connection:
    """A SQLite file as an older release left it: migrations 1 to ``version`` applied."""
    from outlast.store.sql import migrations

    con = sqlite3.connect(path)
    for _, script in migrations("sqlite")[:version]:
        con.executescript(script)
    con.executescript("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, "
                      "applied_at REAL NOT NULL DEFAULT (julianday('now')))")
    con.executemany("INSERT INTO schema_migrations (version) VALUES (?)",
                    [(v,) for v in range(1, version + 1)])
    return con


async def postgres_at_version(pg_cluster: Any, version: int) -> tuple[str, Any]:
    """A new PostgreSQL database as an older release left it (migrations 1 to
    ``version`` applied): its URL and an open asyncpg connection to it."""
    import asyncpg

    from outlast.store.sql import load_queries, migrations

    name = f"v{version}_{os.getpid()}"
    pg_cluster.psql(f"DROP DATABASE IF EXISTS {name}")
    pg_cluster.psql(f"CREATE DATABASE {name}")
    url = pg_cluster.url(name)
    con = await asyncpg.connect(url)
    for _, script in migrations("postgres")[:version]:
        await con.execute(script)
    await con.execute(load_queries("postgres")["schema_migrations_create"].sql)
    await con.executemany("INSERT INTO schema_migrations VALUES ($1, 1)",
                          [(v,) for v in range(1, version + 1)])
    return url, con


@pytest.mark.postgres
async def test_both_backends_migrate_to_the_same_schema(tmp_path: Path, pg_url: str) -> None:
    path = tmp_path / "outlast.db"
    sqlite_store = SQLiteStore(path)
    await sqlite_store.open()
    await sqlite_store.close()
    pg_store = PostgresStore(pg_url, min_size=1, max_size=2)
    await pg_store.open()
    await pg_store.close()

    lite = sqlite_schema(path)
    pg = await postgres_schema(pg_url)
    # The one deliberate difference (sqlite/0008_run_seqs.sql): SQLite keeps each run's
    # last_seq in a narrow table, out of a runs row that a long input spreads over
    # overflow pages, and what the fence reads of a running run in an index of its
    # own; PostgreSQL keeps last_seq in the row.
    assert lite["indexes"].pop("runs_fence") == \
        ("runs", ("rid", "lease_holder", "attempts", "status"), False, True)
    assert lite["tables"] == sorted(pg["tables"] + ["run_seqs"])
    assert lite["columns"].pop("run_seqs") == {"rid": ("integer", True),
                                               "last_seq": ("integer", True)}
    assert ("run_seqs", "primary", ("rid",)) in lite["keys"]
    lite["keys"].discard(("run_seqs", "primary", ("rid",)))
    lite["tables"].remove("run_seqs")
    assert pg["columns"]["runs"].pop("last_seq") == ("integer", True)
    assert lite["tables"] == pg["tables"]
    assert {"threads", "runs", "events", "interrupts", "schema_migrations"} <= set(pg["tables"])
    for table in pg["tables"]:
        assert lite["columns"][table] == pg["columns"][table], table
    assert lite["indexes"] == pg["indexes"]
    assert "interrupts_continuation" in pg["indexes"]
    assert lite["keys"] == pg["keys"]
    # A run as every read but a claim sees it: all of it but its input (0012).
    assert lite["views"] == pg["views"]
    assert set(pg["views"]["run_records"]) == set(pg["columns"]["runs"]) - {"input"} | {"last_seq"}


async def test_an_existing_version_1_sqlite_file_is_brought_up_to_date(tmp_path: Path) -> None:
    """A file made by the first schema keeps its interrupts' order through version 2."""
    from outlast.store.sql import migrations

    path = tmp_path / "outlast.db"
    [(_, first), *_] = migrations("sqlite")
    con = sqlite3.connect(path)
    con.executescript(first + """
        CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY,
            applied_at REAL NOT NULL DEFAULT (julianday('now')));
        INSERT INTO schema_migrations (version) VALUES (1);
        INSERT INTO threads (owner, id, created_at, updated_at) VALUES ('o', 't', 1, 1);
        INSERT INTO interrupts (tid, id, rid, run_id, body) VALUES (1, 'z', 1, 'r', '{}');
        INSERT INTO interrupts (tid, id, rid, run_id, body) VALUES (1, 'a', 1, 'r', '{}');
    """)
    con.close()
    store = SQLiteStore(path)
    await store.open()
    try:
        await store.write([])
        # Raised later: numbered after the ones already there.
        async with store._write() as c:
            await c.many("interrupt_insert", [{"tid": 1, "id": "m", "rid": 1, "run_id": "r",
                                               "body": "{}", "expires_ts": None}])
        assert [i.id for i in await store.interrupts(tid=1)] == ["z", "a", "m"]
    finally:
        await store.close()
    assert sqlite_schema(path)["indexes"]["interrupts_continuation"] == \
        ("interrupts", ("continuation_rid",), False, False)


async def test_a_version_6_sqlite_log_moves_to_append_order_whole(tmp_path: Path) -> None:
    """Version 7 moves the log out of the table clustered by (rid, seq): every event,
    its boundary flag and its order survive, and reads by run still use the key."""
    from outlast.store.sql import migrations

    path = tmp_path / "outlast.db"
    con = sqlite_at_version(path, 6)
    assert con.execute("SELECT sql FROM sqlite_master WHERE name = 'events'"
                       ).fetchone()[0].rstrip().endswith("WITHOUT ROWID")
    con.execute("INSERT INTO threads (owner, id, created_at, updated_at) "
                "VALUES ('o', 't', 1, 1)")
    for rid in (1, 2):
        con.execute(
            "INSERT INTO runs (rid, owner, id, tid, thread_id, agent, status, "
            "idempotency_key, fingerprint, input, options, created_at) "
            "VALUES (?, 'o', ?, 1, 't', 'demo', 'succeeded', ?, 'f', '{}', '{}', 1)",
            (rid, f"r{rid}", f"r{rid}"))
    # Interleaved, as runs streaming at once append them.
    rows = [(rid, seq, int(seq % 5 == 0), f'{{"n":{rid * 1000 + seq}}}')
            for seq in range(1, 41) for rid in (2, 1)]
    con.executemany("INSERT INTO events (rid, seq, boundary, body) VALUES (?, ?, ?, ?)", rows)
    con.commit()
    con.close()

    store = SQLiteStore(path)
    await store.open()
    try:
        for rid in (1, 2):
            events = await store.read_events(rid, 0, 100)
            assert [(e.seq, e.boundary, e.body) for e in events] == \
                [(s, bool(b), body) for r, s, b, body in sorted(rows) if r == rid]
            assert await store.last_boundary(rid, 37) == 35
    finally:
        await store.close()
    con = sqlite3.connect(path)
    try:
        assert "WITHOUT ROWID" not in con.execute(
            "SELECT sql FROM sqlite_master WHERE name = 'events'").fetchone()[0]
        plan = " ".join(r[3] for r in con.execute(
            "EXPLAIN QUERY PLAN SELECT body FROM events WHERE rid = 1 AND seq > 3 "
            "ORDER BY seq"))
        assert "sqlite_autoindex_events_1" in plan, plan
        assert con.execute("SELECT MAX(version) FROM schema_migrations").fetchone()[0] == \
            len(migrations("sqlite"))
    finally:
        con.close()
    assert sqlite_schema(path)["indexes"]["events_boundaries"] == \
        ("events", ("rid", "seq"), False, True)


async def test_a_version_7_sqlite_file_keeps_every_runs_last_seq(tmp_path: Path) -> None:
    """Version 8 moves last_seq out of the runs rows into run_seqs: every run keeps its
    value, a run inserted afterwards gets its row at 0, and deleting a run takes its
    row with it."""
    path = tmp_path / "outlast.db"
    con = sqlite_at_version(path, 7)
    con.execute("INSERT INTO threads (owner, id, created_at, updated_at) "
                "VALUES ('o', 't', 1, 1)")
    history = "x" * 40_000  # a row over overflow pages, as a resent history makes
    for rid, seq in ((1, 0), (2, 7), (3, 40_000)):
        con.execute(
            "INSERT INTO runs (rid, owner, id, tid, thread_id, agent, status, "
            "idempotency_key, fingerprint, input, options, created_at, last_seq) "
            "VALUES (?, 'o', ?, 1, 't', 'demo', 'succeeded', ?, 'f', ?, '{}', 1, ?)",
            (rid, f"r{rid}", f"r{rid}", history, seq))
    con.commit()
    con.close()

    store = SQLiteStore(path)
    await store.open()
    try:
        assert [(r.id, r.last_seq) for r in await store.list_runs(1, 10, None)] == \
            [("r3", 40_000), ("r2", 7), ("r1", 0)]
        run = await store.get_run("o", "r2")
        assert run is not None and run.last_seq == 7
    finally:
        await store.close()
    con = sqlite3.connect(path)
    try:
        assert "last_seq" not in [r[1] for r in con.execute("PRAGMA table_info(runs)")]
        assert con.execute("SELECT DISTINCT length(input) FROM runs").fetchall() == [(40_000,)]
        con.execute("PRAGMA foreign_keys = ON")
        con.execute(
            "INSERT INTO runs (rid, principal, id, tid, thread_id, agent, status, "
            "idempotency_key, fingerprint, input, options, created_at) "
            "VALUES (4, 'o', 'r4', 1, 't', 'demo', 'queued', 'r4', 'f', '{}', '{}', 1)")
        con.execute("DELETE FROM runs WHERE rid = 2")
        assert con.execute("SELECT rid, last_seq FROM run_seqs ORDER BY rid").fetchall() == \
            [(1, 0), (3, 40_000), (4, 0)]
    finally:
        con.close()


@pytest.mark.postgres
async def test_a_postgres_run_record_stays_narrow_whatever_its_input(pg_url: str) -> None:
    """Every commit rewrites the runs row of every run in it (its last_seq): a resent
    history, which compresses well below PostgreSQL's 2 KB threshold, must still leave
    the row (schema 11)."""
    import asyncpg

    history = json.dumps({"messages": [
        {"id": f"m{i}", "role": "user", "content": "How is the repository laid out? " * 16}
        for i in range(60)]})
    assert len(history) > 30_000
    con = await asyncpg.connect(pg_url)
    try:
        await con.execute(
            "INSERT INTO threads (principal, id, created_at, updated_at) VALUES ('o', 't', 1, 1)")
        for run_id, text in (("long", history), ("short", '{"messages": []}')):
            await con.execute(
                "INSERT INTO runs (principal, id, tid, thread_id, agent, status, idempotency_key, "
                "fingerprint, input, options, created_at) VALUES ('o', $1, "
                "(SELECT tid FROM threads), 't', 'demo', 'running', $1, 'f', $2, '{}', 1)",
                run_id, text)
        await con.execute("UPDATE runs SET last_seq = last_seq + 1")  # as a commit does
        # The long input, compressed to about 1 KB, lives in the TOAST table: the row
        # keeps a pointer. (pg_column_size of a whole row would not tell: making the
        # row a value inlines what is out of line.)
        toast = await con.fetchval(
            "SELECT reltoastrelid::regclass::text FROM pg_class WHERE relname = 'runs'")
        out_of_line = await con.fetchval(f"SELECT count(DISTINCT chunk_id) FROM {toast}")
        compressed = await con.fetchval(
            "SELECT pg_column_size(input) FROM runs WHERE id = 'long'")
    finally:
        await con.close()
    assert compressed < 2000  # small enough that PostgreSQL alone would keep it inline
    assert out_of_line == 1


# Inputs as clients sent them, and the protocol version schema 12 reads from each.
VERSIONED_INPUTS = [
    ("v1", json.dumps({"protocolVersion": "1.0", "messages": [
        {"id": "m", "role": "user", "content": "a history \u0000 " * 3000}]}), "1.0"),
    ("v0", json.dumps({"protocolVersion": "0.3", "messages": []}), "0.3"),
    ("none", json.dumps({"messages": []}), None),
    ("number", json.dumps({"protocolVersion": 1, "messages": []}), None),
]


async def _versions_and_inputs(store: Any) -> None:
    """Every run kept its input (the claims that start runs read it) and has the version
    of its input in a column of its own; a run read any other way comes without it."""
    for run_id, _, version in VERSIONED_INPUTS:
        run = await store.get_run("o", run_id)
        assert run is not None and run.protocol_version == version, run_id
        assert run.input_json is None and run.input == {}
    assert {r.id: r.protocol_version for r in await store.list_runs(1, 10, None)} == \
        {run_id: version for run_id, _, version in VERSIONED_INPUTS}
    claimed = await store.claim_queued("me", 60.0, 10)
    assert [r.id for r in claimed] == ["v1"]  # the thread's oldest queued run
    assert claimed[0].input_json == VERSIONED_INPUTS[0][1]
    assert claimed[0].protocol_version == "1.0"


async def test_a_version_11_sqlite_file_gets_each_runs_protocol_version(tmp_path: Path) -> None:
    """Version 12 reads each stored input's protocolVersion into a column, so a reattach
    need not read the input, and puts every read of a run but a claim on run_records."""
    path = tmp_path / "outlast.db"
    con = sqlite_at_version(path, 11)
    con.execute("INSERT INTO threads (owner, id, created_at, updated_at) "
                "VALUES ('o', 't', 1, 1)")
    for run_id, text, _ in VERSIONED_INPUTS:
        con.execute(
            "INSERT INTO runs (owner, id, tid, thread_id, agent, status, idempotency_key, "
            "fingerprint, input, options, created_at) "
            "VALUES ('o', ?, 1, 't', 'demo', 'queued', ?, 'f', ?, '{}', 1)",
            (run_id, run_id, text))
    con.commit()
    con.close()
    store = SQLiteStore(path)
    await store.open()
    try:
        await _versions_and_inputs(store)
    finally:
        await store.close()


@pytest.mark.postgres
async def test_a_version_11_postgres_database_gets_each_runs_protocol_version(
        pg_cluster: Any) -> None:
    url, con = await postgres_at_version(pg_cluster, 11)
    try:
        await con.execute(
            "INSERT INTO threads (owner, id, created_at, updated_at) VALUES ('o', 't', 1, 1)")
        for run_id, text, _ in VERSIONED_INPUTS:
            await con.execute(
                "INSERT INTO runs (owner, id, tid, thread_id, agent, status, idempotency_key, "
                "fingerprint, input, options, created_at) VALUES ('o', $1, 1, 't', 'demo', "
                "'queued', $1, 'f', $2, '{}', 1)", run_id, text)
    finally:
        await con.close()
    store = PostgresStore(url, min_size=1, max_size=2)
    await store.open()
    try:
        await _versions_and_inputs(store)
    finally:
        await store.close()


# Version 15 renames columns (owner -> principal, lease_owner -> lease_holder): a thread, a
# running run with its lease, an idempotency key and a usage row written under version 14
# read the same after it.
V14_ROWS = [
    "INSERT INTO threads (owner, id, created_at, updated_at) VALUES ('alice', 't', 1, 1)",
    "INSERT INTO runs (owner, id, tid, thread_id, agent, status, idempotency_key, fingerprint, "
    "input, options, created_at, lease_owner, lease_expires_at, attempts) VALUES ('alice', 'r', "
    "1, 't', 'demo', 'running', 'k', 'f', '{}', '{}', 1, 'gone-process', 5, 1)",
    "INSERT INTO token_usage (rid, owner, thread_id, run_id, attempt, at, provider, model, "
    "input_tokens, output_tokens, total_tokens, reasoning_tokens, cached_tokens) "
    "VALUES (1, 'alice', 't', 'r', 1, 2, 'p', 'm', 3, 4, 7, 0, 0)",
]


async def _v14_rows_read_the_same(store: Any) -> None:
    run = await store.get_run("alice", "r")
    assert run is not None and (run.principal, run.lease_holder, run.status) == \
        ("alice", "gone-process", "running")
    assert await store.get_run("bob", "r") is None
    assert [t.id for t in (await store.list_threads("alice", None, 10, None)).threads] == ["t"]
    assert (await store.list_threads("bob", None, 10, None)).threads == []
    models, by_thread = await store.usage_summary("alice", 0, 10)
    assert [(m.model, m.total_tokens) for m in models] == [("m", 7)]
    assert [(t.key, t.total_tokens) for t in by_thread] == [("t", 7)]
    assert await store.usage_total("alice", 0) == 7 and await store.usage_total("bob", 0) == 0


async def test_a_version_14_sqlite_file_keeps_its_principals_and_leases(tmp_path: Path) -> None:
    path = tmp_path / "outlast.db"
    con = sqlite_at_version(path, 14)
    for sql in V14_ROWS:
        con.execute(sql)
    con.commit()
    con.close()
    store = SQLiteStore(path)
    await store.open()
    try:
        await _v14_rows_read_the_same(store)
    finally:
        await store.close()
    con = sqlite3.connect(path)
    try:
        columns = {t: [r[1] for r in con.execute(f"PRAGMA table_info({t})")]
                   for t in ("threads", "runs", "idempotency", "token_usage", "webhooks")}
        assert not [t for t, cs in columns.items() if "owner" in cs or "lease_owner" in cs]
    finally:
        con.close()


@pytest.mark.postgres
async def test_a_version_14_postgres_database_keeps_its_principals_and_leases(
        pg_cluster: Any) -> None:
    url, con = await postgres_at_version(pg_cluster, 14)
    try:
        for sql in V14_ROWS:
            await con.execute(sql)
    finally:
        await con.close()
    store = PostgresStore(url, min_size=1, max_size=2)
    await store.open()
    try:
        await _v14_rows_read_the_same(store)
    finally:
        await store.close()
