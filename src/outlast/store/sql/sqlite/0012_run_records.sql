-- outlast schema, version 12: a run's record is read without its input.
--
-- A run's input is the RunAgentInput with whatever history its client resent, up to
-- megabytes for a long agent session. Every read of a run (a reattach, GET /runs/{id},
-- a thread's view, a listing, admission's checks) fetched it, and a reattach parsed it
-- whole for one field, protocolVersion: 6 ms of a reattach with a 1.8 MB history.
-- The version gets a column of its own, filled from the stored inputs, and the
-- run_records view is a run without its input; only the claims that start a run, the
-- one reader that needs it, read the input (from runs).
ALTER TABLE runs ADD COLUMN protocol_version TEXT;
UPDATE runs SET protocol_version = json_extract(input, '$.protocolVersion')
WHERE CASE WHEN json_valid(input) THEN json_type(input, '$.protocolVersion') = 'text' END;
-- On SQLite a run's last_seq is in run_seqs (version 8).
-- A later migration that drops or retypes a column of runs this view reads must drop
-- and recreate the view (a column added to runs is not in it until then).
CREATE VIEW run_records AS
SELECT r.rid, r.owner, r.id, r.tid, r.thread_id, r.agent, r.status, r.idempotency_key,
       r.fingerprint, r.options, r.created_at, r.started_at, r.finished_at, r.attempts,
       s.last_seq, r.outcome, r.error, r.lease_owner, r.lease_expires_at,
       r.cancel_requested, r.compacted_at, r.protocol_version
FROM runs r JOIN run_seqs s ON s.rid = r.rid;
