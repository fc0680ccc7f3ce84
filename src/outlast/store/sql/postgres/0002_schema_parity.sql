-- outlast schema, version 2 (PostgreSQL). Keep in step with sqlite/0002_schema_parity.sql
-- (tests/integration/test_store_schema.py compares the catalogs).

-- Threads page on (updated_at, id): the cursor names the owner's own thread.
DROP INDEX threads_owner_updated;
CREATE INDEX threads_owner_updated ON threads (owner, updated_at DESC, id DESC);
