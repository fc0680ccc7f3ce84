-- outlast schema, version 4 (PostgreSQL): the webhook outbox (G12). Keep in step with
-- sqlite/0004_webhooks.sql (tests/integration/test_store_schema.py compares the catalogs).

-- One row per delivery owed: inserted in the transaction that ends or interrupts the
-- run, so a committed end always has its notification recorded. next_at is when the
-- next attempt is due, and while an attempt is in flight, when its lease expires (a
-- process that died mid-delivery leaves the row due again then: at least once).
-- A deleted thread's runs leave their deliveries owed (rid becomes NULL).
CREATE TABLE webhooks (
    wid           BIGSERIAL        PRIMARY KEY,
    rid           BIGINT           REFERENCES runs (rid) ON DELETE SET NULL,
    id            TEXT             NOT NULL,
    url           TEXT             NOT NULL,
    type          TEXT             NOT NULL,
    body          TEXT             NOT NULL,
    created_at    DOUBLE PRECISION NOT NULL,
    expires_at    DOUBLE PRECISION NOT NULL,
    status        TEXT             NOT NULL DEFAULT 'pending',
    attempts      INTEGER          NOT NULL DEFAULT 0,
    next_at       DOUBLE PRECISION NOT NULL,
    lease_owner   TEXT,
    last_status   INTEGER,
    last_error    TEXT,
    delivered_at  DOUBLE PRECISION,
    UNIQUE (id)
);
CREATE INDEX webhooks_run ON webhooks (rid);
CREATE INDEX webhooks_due ON webhooks (next_at) WHERE status = 'pending';
