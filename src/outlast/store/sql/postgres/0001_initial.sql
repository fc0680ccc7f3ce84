-- outlast schema, version 1 (PostgreSQL). Later versions: 0002_*.sql and on, in step with sqlite/.
-- JSON bodies stay TEXT: the log returns every event byte for byte as it was written.

CREATE TABLE threads (
    tid              BIGSERIAL PRIMARY KEY,
    owner            TEXT             NOT NULL,
    id               TEXT             NOT NULL,
    status           TEXT             NOT NULL DEFAULT 'idle',
    title            TEXT,
    created_at       DOUBLE PRECISION NOT NULL,
    updated_at       DOUBLE PRECISION NOT NULL,
    state            TEXT             NOT NULL DEFAULT '{}',
    session_state    TEXT             NOT NULL DEFAULT '{}',
    as_of_run        TEXT,
    as_of_seq        BIGINT,
    UNIQUE (owner, id)
);
CREATE INDEX threads_owner_updated ON threads (owner, updated_at DESC);

-- One row per message of a thread's snapshot: a boundary writes only the
-- messages that changed.
CREATE TABLE messages (
    tid       BIGINT           NOT NULL REFERENCES threads (tid) ON DELETE CASCADE,
    id        TEXT             NOT NULL,
    position  DOUBLE PRECISION NOT NULL,
    body      TEXT             NOT NULL,
    PRIMARY KEY (tid, id)
);
CREATE INDEX messages_order ON messages (tid, position);

CREATE TABLE runs (
    rid               BIGSERIAL PRIMARY KEY,
    owner             TEXT             NOT NULL,
    id                TEXT             NOT NULL,
    tid               BIGINT           NOT NULL REFERENCES threads (tid) ON DELETE CASCADE,
    thread_id         TEXT             NOT NULL,
    agent             TEXT             NOT NULL,
    status            TEXT             NOT NULL,
    idempotency_key   TEXT             NOT NULL,
    fingerprint       TEXT             NOT NULL,
    input             TEXT             NOT NULL,
    options           TEXT             NOT NULL,
    created_at        DOUBLE PRECISION NOT NULL,
    started_at        DOUBLE PRECISION,
    finished_at       DOUBLE PRECISION,
    attempts          INTEGER          NOT NULL DEFAULT 0,
    last_seq          BIGINT           NOT NULL DEFAULT 0,
    outcome           TEXT,
    error             TEXT,
    lease_owner       TEXT,
    lease_expires_at  DOUBLE PRECISION,
    cancel_requested  INTEGER          NOT NULL DEFAULT 0,
    UNIQUE (owner, id)
);
CREATE INDEX runs_thread ON runs (tid, rid);
CREATE INDEX runs_active ON runs (status, rid) WHERE status IN ('queued', 'running');
CREATE INDEX runs_lease_owner ON runs (lease_owner) WHERE status = 'running';

-- The append-only log. boundary = 1 when the run was at a safe boundary
-- right after this event: a stream starting mid-run folds only from there.
CREATE TABLE events (
    rid       BIGINT  NOT NULL REFERENCES runs (rid) ON DELETE CASCADE,
    seq       BIGINT  NOT NULL,
    boundary  INTEGER NOT NULL DEFAULT 0,
    body      TEXT    NOT NULL,
    PRIMARY KEY (rid, seq)
);

CREATE TABLE idempotency (
    owner        TEXT             NOT NULL,
    key          TEXT             NOT NULL,
    rid          BIGINT           NOT NULL REFERENCES runs (rid) ON DELETE CASCADE,
    fingerprint  TEXT             NOT NULL,
    created_at   DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (owner, key)
);
CREATE INDEX idempotency_created ON idempotency (created_at);

-- raised orders interrupts as SQLite's rowid does: by first insertion.
CREATE TABLE interrupts (
    tid              BIGINT           NOT NULL REFERENCES threads (tid) ON DELETE CASCADE,
    id               TEXT             NOT NULL,
    raised           BIGSERIAL        NOT NULL,
    rid              BIGINT           NOT NULL,
    run_id           TEXT             NOT NULL,
    body             TEXT             NOT NULL,
    expires_ts       DOUBLE PRECISION,
    status           TEXT             NOT NULL DEFAULT 'pending',
    answered_by      TEXT,
    answered_at      DOUBLE PRECISION,
    resolution       TEXT,
    continuation_rid BIGINT,
    PRIMARY KEY (tid, id)
);
CREATE INDEX interrupts_run ON interrupts (rid);
CREATE INDEX interrupts_continuation ON interrupts (continuation_rid);

CREATE TABLE effects (
    rid           BIGINT           NOT NULL REFERENCES runs (rid) ON DELETE CASCADE,
    key           TEXT             NOT NULL,
    attempt       INTEGER          NOT NULL,
    status        TEXT             NOT NULL,
    result        TEXT,
    started_at    DOUBLE PRECISION NOT NULL,
    completed_at  DOUBLE PRECISION,
    PRIMARY KEY (rid, key)
);
