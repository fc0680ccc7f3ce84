-- outlast schema, version 5 (SQLite): retention (spec §6). Keep in step with
-- postgres/0005_retention.sql (tests/integration/test_store_schema.py compares the catalogs).
-- The file's auto_vacuum mode (INCREMENTAL, so freed pages go back to the file system)
-- is not schema: SQLiteStore.open sets it, see there.

-- When retention removed the run's events. Set in the transaction that removes the
-- first of them, so a reader never gets part of a log: from then on its events
-- answer 410 run_compacted; the record itself stays.
ALTER TABLE runs ADD COLUMN compacted_at REAL;

-- Final runs whose events are still kept, oldest first: what the next batch takes.
CREATE INDEX runs_compactable ON runs (finished_at)
    WHERE compacted_at IS NULL AND finished_at IS NOT NULL;

-- Compacted runs with more events than one batch removes: the rest goes in later
-- batches (each a short transaction), and this row finds them after a restart.
CREATE TABLE compacting (
    rid  INTEGER PRIMARY KEY REFERENCES runs (rid) ON DELETE CASCADE
);
