-- outlast schema, version 15: one name per concept. Keep in step with
-- postgres/0015_principal.sql (tests/integration/test_store_schema.py compares them).
-- The principal a thread, a run, an idempotency key and a usage row belong to was in a
-- column named owner, and the process holding a lease in one named lease_owner: the
-- columns now say principal and lease_holder, as the code does. SQLite rewrites the
-- indexes and the run_records view that name a renamed column; the indexes whose names
-- said owner are made again under the new names.
ALTER TABLE threads RENAME COLUMN owner TO principal;
ALTER TABLE runs RENAME COLUMN owner TO principal;
ALTER TABLE runs RENAME COLUMN lease_owner TO lease_holder;
ALTER TABLE idempotency RENAME COLUMN owner TO principal;
ALTER TABLE token_usage RENAME COLUMN owner TO principal;
ALTER TABLE webhooks RENAME COLUMN lease_owner TO lease_holder;
DROP INDEX threads_owner_updated;
CREATE INDEX threads_principal_updated ON threads (principal, updated_at DESC, id DESC);
DROP INDEX runs_lease_owner;
CREATE INDEX runs_lease_holder ON runs (lease_holder) WHERE status = 'running';
DROP INDEX token_usage_owner;
CREATE INDEX token_usage_principal ON token_usage (principal, at);
DROP INDEX runs_owner_created;
CREATE INDEX runs_principal_created ON runs (principal, created_at);
