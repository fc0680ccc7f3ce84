-- outlast schema, version 1 (SQLite). Later versions: 0002_*.sql and on, in step with postgres/.

CREATE TABLE threads (
    tid              INTEGER PRIMARY KEY,
    owner            TEXT    NOT NULL,
    id               TEXT    NOT NULL,
    status           TEXT    NOT NULL DEFAULT 'idle',
    title            TEXT,
    created_at       REAL    NOT NULL,
    updated_at       REAL    NOT NULL,
    state            TEXT    NOT NULL DEFAULT '{}',
    session_state    TEXT    NOT NULL DEFAULT '{}',
    as_of_run        TEXT,
    as_of_seq        INTEGER,
    UNIQUE (owner, id)
);
CREATE INDEX threads_owner_updated ON threads (owner, updated_at DESC);

-- One row per message of a thread's snapshot: a boundary writes only the
-- messages that changed (issue: snapshots must not cost O(n^2) bytes).
CREATE TABLE messages (
    tid       INTEGER NOT NULL REFERENCES threads (tid) ON DELETE CASCADE,
    id        TEXT    NOT NULL,
    position  REAL    NOT NULL,
    body      TEXT    NOT NULL,
    PRIMARY KEY (tid, id)
);
CREATE INDEX messages_order ON messages (tid, position);

CREATE TABLE runs (
    rid               INTEGER PRIMARY KEY,
    owner             TEXT    NOT NULL,
    id                TEXT    NOT NULL,
    tid               INTEGER NOT NULL REFERENCES threads (tid) ON DELETE CASCADE,
    thread_id         TEXT    NOT NULL,
    agent             TEXT    NOT NULL,
    status            TEXT    NOT NULL,
    idempotency_key   TEXT    NOT NULL,
    fingerprint       TEXT    NOT NULL,
    input             TEXT    NOT NULL,
    options           TEXT    NOT NULL,
    created_at        REAL    NOT NULL,
    started_at        REAL,
    finished_at       REAL,
    attempts          INTEGER NOT NULL DEFAULT 0,
    last_seq          INTEGER NOT NULL DEFAULT 0,
    outcome           TEXT,
    error             TEXT,
    lease_owner       TEXT,
    lease_expires_at  REAL,
    cancel_requested  INTEGER NOT NULL DEFAULT 0,
    UNIQUE (owner, id)
);
CREATE INDEX runs_thread ON runs (tid, rid);
CREATE INDEX runs_active ON runs (status, rid) WHERE status IN ('queued', 'running');

-- The append-only log. boundary = 1 when the run was at a safe boundary
-- right after this event: a stream starting mid-run folds only from there.
CREATE TABLE events (
    rid       INTEGER NOT NULL REFERENCES runs (rid) ON DELETE CASCADE,
    seq       INTEGER NOT NULL,
    boundary  INTEGER NOT NULL DEFAULT 0,
    body      TEXT    NOT NULL,
    PRIMARY KEY (rid, seq)
) WITHOUT ROWID;

CREATE TABLE idempotency (
    owner        TEXT    NOT NULL,
    key          TEXT    NOT NULL,
    rid          INTEGER NOT NULL REFERENCES runs (rid) ON DELETE CASCADE,
    fingerprint  TEXT    NOT NULL,
    created_at   REAL    NOT NULL,
    PRIMARY KEY (owner, key)
);
CREATE INDEX idempotency_created ON idempotency (created_at);

CREATE TABLE interrupts (
    tid              INTEGER NOT NULL REFERENCES threads (tid) ON DELETE CASCADE,
    id               TEXT    NOT NULL,
    rid              INTEGER NOT NULL,
    run_id           TEXT    NOT NULL,
    body             TEXT    NOT NULL,
    expires_ts       REAL,
    status           TEXT    NOT NULL DEFAULT 'pending',
    answered_by      TEXT,
    answered_at      REAL,
    resolution       TEXT,
    continuation_rid INTEGER,
    PRIMARY KEY (tid, id)
);
CREATE INDEX interrupts_run ON interrupts (rid);

CREATE TABLE effects (
    rid           INTEGER NOT NULL REFERENCES runs (rid) ON DELETE CASCADE,
    key           TEXT    NOT NULL,
    attempt       INTEGER NOT NULL,
    status        TEXT    NOT NULL,
    result        TEXT,
    started_at    REAL    NOT NULL,
    completed_at  REAL,
    PRIMARY KEY (rid, key)
);
