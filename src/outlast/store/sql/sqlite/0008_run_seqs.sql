-- outlast schema, version 8 (SQLite): each run's last seq in a narrow table of its own.
--
-- Every commit moves the last_seq of every run it holds events for. In the runs row
-- that column sat after the input, the RunAgentInput with whatever history the
-- client resent: with a long history the row spans overflow pages, and the column
-- lands on the last of them, so every commit rewrote a 4 KB page per run in it (and
-- the whole row whenever the number's encoding grew). At 300 runs with 36 KB inputs
-- a commit wrote 549 pages instead of 250 and took twice as long. Here hundreds of
-- runs share a page. The fence also reads each run's lease (lease_owner, attempts),
-- which come after the input too: reading them walked the row's overflow chain, so
-- runs_fence holds them (and status) for running runs: the fence reads only that index.
-- PostgreSQL keeps the column and needs no index: its long inputs live out of line,
-- and an update copies the short row (postgres/0008 changes nothing).
CREATE TABLE run_seqs (
    rid       INTEGER PRIMARY KEY REFERENCES runs (rid) ON DELETE CASCADE,
    last_seq  INTEGER NOT NULL DEFAULT 0
);
INSERT INTO run_seqs (rid, last_seq) SELECT rid, last_seq FROM runs;
ALTER TABLE runs DROP COLUMN last_seq;
-- Every run has its row, however it was inserted.
CREATE TRIGGER runs_seq AFTER INSERT ON runs
BEGIN
    INSERT INTO run_seqs (rid) VALUES (NEW.rid);
END;
-- What the fence reads of a running run, without its row.
CREATE INDEX runs_fence ON runs (rid, lease_owner, attempts, status) WHERE status = 'running';
