-- outlast schema, version 14: the usage ledger, and what limits per principal read. Keep in step with
-- postgres/0014_token_usage.sql (tests/integration/test_store_schema.py compares them).
-- One row per model call's tokens (per provider and model), written in the transaction
-- of the events that follow the call, so a crash keeps what was spent. The row names
-- the run's owner, thread and run by value: usage outlives a deleted thread and
-- retention (what was spent stays spent); rid is kept only to read a run's rows.
CREATE TABLE token_usage (
    uid               INTEGER PRIMARY KEY,
    rid               INTEGER,
    owner             TEXT    NOT NULL,
    thread_id         TEXT    NOT NULL,
    run_id            TEXT    NOT NULL,
    attempt           INTEGER NOT NULL,
    at                REAL    NOT NULL,
    provider          TEXT,
    model             TEXT,
    input_tokens      INTEGER NOT NULL,
    output_tokens     INTEGER NOT NULL,
    total_tokens      INTEGER NOT NULL,
    reasoning_tokens  INTEGER NOT NULL,
    cached_tokens     INTEGER NOT NULL
);
CREATE INDEX token_usage_run ON token_usage (rid);
CREATE INDEX token_usage_owner ON token_usage (owner, at);

-- A principal's runs by creation time: how many it started in the last minute
-- (engine/limits.py, checked at admission).
CREATE INDEX runs_owner_created ON runs (owner, created_at);
