-- outlast schema, version 12: a run's record is read without its input.
--
-- A run's input is the RunAgentInput with whatever history its client resent, up to
-- megabytes for a long agent session. Every read of a run (a reattach, GET /runs/{id},
-- a thread's view, a listing, admission's checks) fetched it out of line, and a
-- reattach parsed it whole for one field, protocolVersion. The version gets a column
-- of its own, filled from the stored inputs, and the run_records view is a run without
-- its input; only the claims that start a run, the one reader that needs it, read the
-- input (from runs).
ALTER TABLE runs ADD COLUMN protocol_version TEXT;
-- Read from each input with its escapes (a backslash and the character after it) taken
-- out first: PostgreSQL's JSON functions refuse a text holding \u0000 or a lone
-- surrogate, which a stored input may; without them the structure is the same and a
-- version, which has no escapes, reads the same.
UPDATE runs SET protocol_version = v.version #>> '{}'
FROM (SELECT rid, regexp_replace(input, '\\.', '', 'g')::json -> 'protocolVersion' AS version
      FROM runs WHERE input LIKE '%"protocolVersion"%') AS v
WHERE runs.rid = v.rid AND json_typeof(v.version) = 'string';
-- A later migration that drops or retypes a column of runs this view reads must drop
-- and recreate the view (a column added to runs is not in it until then).
CREATE VIEW run_records AS
SELECT rid, owner, id, tid, thread_id, agent, status, idempotency_key, fingerprint, options,
       created_at, started_at, finished_at, attempts, last_seq, outcome, error, lease_owner,
       lease_expires_at, cancel_requested, compacted_at, protocol_version
FROM runs;
