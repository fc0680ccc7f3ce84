-- outlast schema, version 5 (PostgreSQL): retention (spec §6). Keep in step with
-- sqlite/0005_retention.sql (tests/integration/test_store_schema.py compares the catalogs).
-- Removed events leave dead tuples that autovacuum makes reusable; batches stay
-- small (engine/retention.py), so no transaction holds many row locks for long.

-- When retention removed the run's events (see the SQLite file).
ALTER TABLE runs ADD COLUMN compacted_at DOUBLE PRECISION;

-- Final runs whose events are still kept, oldest first: what the next batch takes.
CREATE INDEX runs_compactable ON runs (finished_at)
    WHERE compacted_at IS NULL AND finished_at IS NOT NULL;

-- Compacted runs whose events go over several batches.
CREATE TABLE compacting (
    rid  BIGINT PRIMARY KEY REFERENCES runs (rid) ON DELETE CASCADE
);
