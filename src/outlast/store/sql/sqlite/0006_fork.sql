-- outlast schema, version 6 (SQLite): forks (spec §3 POST /threads/{id}/fork).

-- Where a fork came from, as JSON {"threadId", "runId", "seq"}; NULL for other threads.
ALTER TABLE threads ADD COLUMN forked_from TEXT;

-- The snapshot a fork started from. The thread's own snapshot moves on with its
-- runs; an older boundary of a fork is rebuilt by folding its runs onto this.
CREATE TABLE fork_bases (
    tid       INTEGER PRIMARY KEY REFERENCES threads (tid) ON DELETE CASCADE,
    messages  TEXT    NOT NULL,
    state     TEXT    NOT NULL
);
