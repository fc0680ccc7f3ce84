-- outlast schema, version 2 (SQLite): the same tables, columns and indexes as
-- PostgreSQL (tests/integration/test_store_schema.py compares the catalogs).

-- Interrupts are listed in the order raised (G7), in both dialects by this column;
-- the trigger numbers a new row as PostgreSQL's sequence does. An answer that
-- re-raises an interrupt (ON CONFLICT DO UPDATE) keeps its place, as there.
ALTER TABLE interrupts ADD COLUMN raised INTEGER NOT NULL DEFAULT 0;
UPDATE interrupts SET raised = rowid;
CREATE TRIGGER interrupts_raised AFTER INSERT ON interrupts
BEGIN
    UPDATE interrupts SET raised = NEW.rowid WHERE rowid = NEW.rowid;
END;

CREATE INDEX runs_lease_owner ON runs (lease_owner) WHERE status = 'running';
CREATE INDEX interrupts_continuation ON interrupts (continuation_rid);

-- Threads page on (updated_at, id): the cursor names the owner's own thread.
DROP INDEX threads_owner_updated;
CREATE INDEX threads_owner_updated ON threads (owner, updated_at DESC, id DESC);
