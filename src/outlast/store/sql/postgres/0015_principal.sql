-- outlast schema, version 15: one name per concept. Keep in step with
-- sqlite/0015_principal.sql (tests/integration/test_store_schema.py compares them).
-- The principal a thread, a run, an idempotency key and a usage row belong to was in a
-- column named owner, and the process holding a lease in one named lease_owner: the
-- columns now say principal and lease_holder, as the code does. The run_records view
-- follows its table's columns but keeps its own names, so it is renamed too.
ALTER TABLE threads RENAME COLUMN owner TO principal;
ALTER TABLE runs RENAME COLUMN owner TO principal;
ALTER TABLE runs RENAME COLUMN lease_owner TO lease_holder;
ALTER VIEW run_records RENAME COLUMN owner TO principal;
ALTER VIEW run_records RENAME COLUMN lease_owner TO lease_holder;
ALTER TABLE idempotency RENAME COLUMN owner TO principal;
ALTER TABLE token_usage RENAME COLUMN owner TO principal;
ALTER TABLE webhooks RENAME COLUMN lease_owner TO lease_holder;
ALTER INDEX threads_owner_updated RENAME TO threads_principal_updated;
ALTER INDEX runs_lease_owner RENAME TO runs_lease_holder;
ALTER INDEX token_usage_owner RENAME TO token_usage_principal;
ALTER INDEX runs_owner_created RENAME TO runs_principal_created;
