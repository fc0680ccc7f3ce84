-- outlast schema, version 7 (SQLite): the log in append order.
--
-- Version 1 kept events in a WITHOUT ROWID table clustered by (rid, seq): each run's
-- events together, bodies inside the key's B-tree. With many runs streaming at once,
-- a commit holds a few events from each of hundreds of runs, and every run's events
-- sat on a page of their own: each commit rewrote a page per run into the WAL (at
-- 300 runs at a model's pace, about 15 KB of writes per event, and commits of 20 ms).
-- A rowid table stores the bodies in the order they are appended, a commit's events
-- on a few adjacent pages; the primary key (rid, seq) becomes an index of small
-- entries beside it, which is what reads by run use. PostgreSQL's heap tables are
-- in append order already (postgres/0007 changes nothing).
CREATE TABLE events_appended (
    rid       INTEGER NOT NULL REFERENCES runs (rid) ON DELETE CASCADE,
    seq       INTEGER NOT NULL,
    boundary  INTEGER NOT NULL DEFAULT 0,
    body      TEXT    NOT NULL,
    PRIMARY KEY (rid, seq)
);
INSERT INTO events_appended (rid, seq, boundary, body)
SELECT rid, seq, boundary, body FROM events ORDER BY rid, seq;
DROP TABLE events;
ALTER TABLE events_appended RENAME TO events;
CREATE INDEX events_boundaries ON events (rid, seq) WHERE boundary = 1;
