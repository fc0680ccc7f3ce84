-- Queries whose PostgreSQL form differs from the shared ones in ../queries.sql:
-- row locks in the order given there, and claims that never wait.
-- Leases are set and compared by the database's clock (clock_timestamp()), never the
-- processes' (G8): their wall clocks need not agree. A claim of an expired lease waits
-- :margin seconds past its expiry, for the holder to stop first (engine/leases.py).

-- name: thread_lock
-- Serialize admissions on one thread across processes (G3): the row lock is held to commit.
SELECT * FROM threads WHERE principal = :principal AND id = :id FOR UPDATE;

-- name: run_claim_queued
-- Lease the oldest queued run of every thread that has none running (one statement).
-- SKIP LOCKED on the run and its thread: claimers never take the same run and never
-- wait, so a claim is never part of a lock cycle.
WITH picked AS (
    SELECT r.rid FROM runs r JOIN threads t ON t.tid = r.tid
    WHERE r.status = 'queued'
      AND NOT EXISTS (SELECT 1 FROM runs q WHERE q.tid = r.tid AND q.rid < r.rid
                      AND q.status IN ('queued', 'running'))
    ORDER BY r.rid LIMIT :limit
    FOR UPDATE OF r, t SKIP LOCKED)
UPDATE runs SET status = 'running', lease_holder = :instance,
    lease_expires_at = EXTRACT(EPOCH FROM clock_timestamp())::float8 + :ttl::float8,
    attempts = runs.attempts + 1, started_at = COALESCE(runs.started_at, :now)
FROM picked
WHERE runs.rid = picked.rid AND runs.status = 'queued'
RETURNING runs.*;

-- name: run_claim_expired
-- Take over running runs whose lease expired (or, with :all_foreign, every run
-- leased by another instance), one atomic statement.
WITH picked AS (
    SELECT rid FROM runs
    WHERE status = 'running'
      AND (lease_holder IS NULL
           OR lease_expires_at < EXTRACT(EPOCH FROM clock_timestamp())::float8
                                 - :margin::float8
           OR (:all_foreign = 1 AND lease_holder <> :instance))
    ORDER BY rid LIMIT :limit
    FOR UPDATE SKIP LOCKED)
UPDATE runs SET lease_holder = :instance,
    lease_expires_at = EXTRACT(EPOCH FROM clock_timestamp())::float8 + :ttl::float8,
    attempts = runs.attempts + 1
FROM picked
WHERE runs.rid = picked.rid
RETURNING runs.*;

-- name: run_renew_leases
-- Heartbeat: extend the leases this instance holds (only those of :rids, a JSON
-- array, when given: runs it still executes); report cancel requests.
-- Rows are locked in rid order, the order a write batch takes them in.
WITH held AS (
    SELECT rid FROM runs WHERE lease_holder = :instance AND status = 'running'
      AND (:rids::jsonb IS NULL
           OR rid IN (SELECT (jsonb_array_elements_text(:rids::jsonb))::bigint))
    ORDER BY rid
    FOR NO KEY UPDATE)
UPDATE runs SET lease_expires_at = EXTRACT(EPOCH FROM clock_timestamp())::float8 + :ttl::float8
FROM held
WHERE runs.rid = held.rid AND runs.lease_holder = :instance AND runs.status = 'running'
RETURNING runs.rid, runs.attempts, runs.cancel_requested;

-- name: runs_fence_append
-- Fencing (G2, G8) for a whole commit: each run of :rows (a JSON array of
-- [rid, instance, attempt, prev_seq, last_seq]) moves its last_seq only when this
-- attempt holds the lease and its view of last_seq is current; the rids that did.
-- The threads are locked before the runs, as admission takes them, each kind in key
-- order (as lease renewal takes runs), so concurrent writers cannot deadlock.
WITH b AS (
    SELECT (x->>0)::bigint AS rid, x->>1 AS instance, (x->>2)::int AS attempt,
           (x->>3)::bigint AS prev_seq, (x->>4)::bigint AS last_seq
    FROM jsonb_array_elements(:rows::jsonb) AS x),
thread AS (
    SELECT t.tid FROM threads t
    WHERE t.tid IN (SELECT r.tid FROM runs r JOIN b ON r.rid = b.rid)
    ORDER BY t.tid
    FOR NO KEY UPDATE),
run AS (
    SELECT r.rid FROM runs r JOIN b ON r.rid = b.rid
    WHERE r.tid IN (SELECT tid FROM thread)
    ORDER BY r.rid
    FOR NO KEY UPDATE OF r)
UPDATE runs SET last_seq = b.last_seq
FROM b, run
WHERE runs.rid = b.rid AND runs.rid = run.rid AND runs.lease_holder = b.instance
  AND runs.attempts = b.attempt AND runs.status = 'running' AND runs.last_seq = b.prev_seq
RETURNING runs.rid;

-- name: run_seqs_append
-- SQLite's fence for runs whose lease its one process knows held (store/sqlite_fence.py),
-- here for the dialects' parity only: PostgreSQL stores never know that (another
-- process may take a lease over), so their commits fence every run with
-- runs_fence_append. Moves last_seq ([rid, prev_seq, last_seq] rows) where current.
WITH b AS (
    SELECT (x->>0)::bigint AS rid, (x->>1)::bigint AS prev_seq, (x->>2)::bigint AS last_seq
    FROM jsonb_array_elements(:rows::jsonb) AS x)
UPDATE runs SET last_seq = b.last_seq
FROM b
WHERE runs.rid = b.rid AND runs.last_seq = b.prev_seq
RETURNING runs.rid;

-- name: run_cancel_queued
-- Cancel a run that never started (run_seq_set then counts the events it is given;
-- thread row first, as admission locks).
WITH thread AS (
    SELECT t.tid FROM threads t
    WHERE t.tid = (SELECT r.tid FROM runs r WHERE r.rid = :rid)
    FOR NO KEY UPDATE)
UPDATE runs SET status = 'cancelled', finished_at = :now, outcome = :outcome,
    cancel_requested = 1
FROM thread
WHERE runs.rid = :rid AND runs.tid = thread.tid AND runs.status = 'queued'
RETURNING runs.tid;

-- name: run_holds_lease
-- Fencing check before journaling an effect; the share lock keeps a takeover
-- (which claims with FOR UPDATE) out until this journal entry commits.
SELECT rid FROM runs WHERE rid = :rid AND lease_holder = :instance AND attempts = :attempt
  AND status = 'running'
FOR SHARE;

-- name: events_frames_after
-- A page of a run's log, each event rendered as :head || seq || :sep || body || :tail
-- and concatenated in seq order by the database (replay's hot path).
SELECT MAX(seq) AS last_seq, COUNT(*) AS n,
       string_agg(:head::text || seq || :sep::text || body || :tail::text, '' ORDER BY seq)
           AS text
FROM (SELECT seq, body FROM events WHERE rid = :rid AND seq > :after
      ORDER BY seq LIMIT :limit) page;

-- retention --

-- name: runs_compactable
-- Final runs whose events are still kept, oldest first; SKIP LOCKED: processes
-- collecting at once take different runs and never wait (final runs are locked
-- by nothing else).
SELECT rid, last_seq FROM runs
WHERE compacted_at IS NULL AND finished_at IS NOT NULL AND finished_at < :cutoff
ORDER BY finished_at LIMIT :limit
FOR NO KEY UPDATE SKIP LOCKED;

-- name: compacting_next
-- A compacted run whose events are not all removed yet, one no other process sweeps.
SELECT rid FROM compacting ORDER BY rid LIMIT 1 FOR UPDATE SKIP LOCKED;

-- name: runs_mark_compacted
-- Mark runs (a JSON array of rids) compacted: their events answer 410 from now on.
UPDATE runs SET compacted_at = :now
WHERE rid IN (SELECT (jsonb_array_elements_text(:rids::jsonb))::bigint)
  AND compacted_at IS NULL;

-- name: events_measure_runs
-- How many events the runs (a JSON array of rids) have, and their bytes.
SELECT COUNT(*) AS events, COALESCE(SUM(octet_length(body)), 0) AS bytes
FROM events WHERE rid IN (SELECT (jsonb_array_elements_text(:rids::jsonb))::bigint);

-- name: events_delete_runs
-- Remove every event of the runs (a JSON array of rids).
DELETE FROM events
WHERE rid IN (SELECT (jsonb_array_elements_text(:rids::jsonb))::bigint);

-- name: events_measure_upto
-- How many events a run has up to a seq, and their bytes.
SELECT COUNT(*) AS events, COALESCE(SUM(octet_length(body)), 0) AS bytes
FROM events WHERE rid = :rid AND seq <= :upto;

-- name: retention_preview
-- What removing the events of runs final before the cutoff would free (a dry run),
-- with what is left of runs compacted over several batches.
SELECT COUNT(DISTINCT r.rid) AS runs, COUNT(e.rid) AS events,
       COALESCE(SUM(octet_length(e.body)), 0) AS bytes
FROM runs r LEFT JOIN events e ON e.rid = r.rid
WHERE r.compacted_at IS NULL AND r.finished_at IS NOT NULL AND r.finished_at < :cutoff
UNION ALL
SELECT 0, COUNT(*), COALESCE(SUM(octet_length(body)), 0)
FROM events WHERE rid IN (SELECT rid FROM compacting);

-- name: constructs_delete_runs
-- Remove the construct index of the runs (a JSON array of rids) with their events.
DELETE FROM constructs WHERE rid IN (SELECT (jsonb_array_elements_text(:rids::jsonb))::bigint);

-- name: run_states_delete_runs
-- Remove the state index of the runs (a JSON array of rids) with their events.
DELETE FROM run_states WHERE rid IN (SELECT (jsonb_array_elements_text(:rids::jsonb))::bigint);

-- webhooks --

-- name: webhook_claim
-- Lease due deliveries to :instance until :lease_until, counting the attempt; a due
-- one past its expiry ends 'expired' instead (one statement: SKIP LOCKED, so no two
-- processes ever hold the same delivery and claimers never wait).
WITH picked AS (
    SELECT wid FROM webhooks
    WHERE status = 'pending' AND next_at <= :now
    ORDER BY next_at LIMIT :limit
    FOR UPDATE SKIP LOCKED)
UPDATE webhooks SET
    status = CASE WHEN webhooks.expires_at <= :now THEN 'expired' ELSE 'pending' END,
    lease_holder = CASE WHEN webhooks.expires_at <= :now THEN NULL ELSE :instance END,
    attempts = webhooks.attempts + CASE WHEN webhooks.expires_at <= :now THEN 0 ELSE 1 END,
    next_at = :lease_until
FROM picked
WHERE webhooks.wid = picked.wid
RETURNING webhooks.*;

-- name: events_insert_batch
-- Append a commit's events in one statement: :rows is a JSON array of
-- [rid, seq, boundary, body].
INSERT INTO events (rid, seq, boundary, body)
SELECT (x->>0)::bigint, (x->>1)::bigint, (x->>2)::int, x->>3
FROM jsonb_array_elements(:rows::jsonb) AS x;

-- name: run_states_insert_batch
-- Index the state a commit's state events start from: :rows is a JSON array of
-- [rid, seq, upto, state].
INSERT INTO run_states (rid, seq, upto, body)
SELECT (x->>0)::bigint, (x->>1)::bigint, (x->>2)::bigint, x->>3
FROM jsonb_array_elements(:rows::jsonb) AS x;

-- name: constructs_open_batch
-- Index the constructs a commit's events opened: :rows is a JSON array of
-- [rid, seq, ord, ckey, body, closed_seq] (closed_seq when the same commit closed it,
-- else null).
INSERT INTO constructs (rid, opened_seq, ord, ckey, body, closed_seq)
SELECT (x->>0)::bigint, (x->>1)::bigint, (x->>2)::int, x->>3, x->>4, (x->>5)::bigint
FROM jsonb_array_elements(:rows::jsonb) AS x;

-- name: constructs_close_batch
-- Close the constructs a commit's events closed: :rows is a JSON array of
-- [rid, seq, ckey]. Each open row takes the first close of its key after it opened
-- (a key reused later in the same commit is another row). Driven by the rows, each
-- looked up in the open-constructs index: a commit with a close for each of many
-- runs costs linear time (a correlated subquery over the array cost quadratic).
UPDATE constructs SET closed_seq = b.seq
FROM (SELECT c.rid, c.opened_seq, c.ord, MIN((x->>1)::bigint) AS seq
      FROM jsonb_array_elements(:rows::jsonb) AS x
      JOIN constructs AS c
        ON c.rid = (x->>0)::bigint AND c.ckey = x->>2
       AND c.closed_seq IS NULL AND c.opened_seq < (x->>1)::bigint
      GROUP BY c.rid, c.opened_seq, c.ord) AS b
WHERE constructs.rid = b.rid AND constructs.opened_seq = b.opened_seq
  AND constructs.ord = b.ord;

-- name: messages_delete_batch
-- Drop messages of snapshots: :rows is a JSON array of [tid, id].
DELETE FROM messages
WHERE (tid, id) IN (SELECT (x->>0)::bigint, x->>1
                    FROM jsonb_array_elements(:rows::jsonb) AS x);

-- name: messages_upsert_batch
-- Write new or changed messages of snapshots: :rows is a JSON array of
-- [tid, id, position, body], each (tid, id) once.
INSERT INTO messages (tid, id, position, body)
SELECT (x->>0)::bigint, x->>1, (x->>2)::double precision, x->>3
FROM jsonb_array_elements(:rows::jsonb) AS x
ON CONFLICT (tid, id) DO UPDATE SET position = excluded.position, body = excluded.body;

-- name: threads_snapshot_batch
-- Move snapshots' coordinates: :rows is a JSON array of
-- [tid, state, session_state, as_of_run, as_of_seq], each tid once; state columns
-- change only when given.
UPDATE threads SET
    state = COALESCE(b.state, threads.state),
    session_state = COALESCE(b.session_state, threads.session_state),
    as_of_run = b.as_of_run, as_of_seq = b.as_of_seq, updated_at = :now
FROM (SELECT (x->>0)::bigint AS tid, x->>1 AS state, x->>2 AS session_state,
             x->>3 AS as_of_run, (x->>4)::bigint AS as_of_seq
      FROM jsonb_array_elements(:rows::jsonb) AS x) AS b
WHERE threads.tid = b.tid;

-- name: messages_start_batch
-- What starting runs need of their threads: :rows is a JSON array of [tid, id] for
-- every message of the runs' inputs, and [tid, null] for each run. One row per tid
-- with its last message's position (NULL: it holds none) and whether it is settled:
-- provably no tool call awaits a result (it holds no message, or its snapshot is as of
-- a boundary of a run that did not end interrupted); a row for each id it holds.
SELECT r.tid AS tid, NULL::text AS id,
       (SELECT MAX(m.position) FROM messages AS m WHERE m.tid = r.tid) AS position,
       (NOT EXISTS (SELECT 1 FROM messages AS m WHERE m.tid = r.tid)
        OR EXISTS (SELECT 1 FROM threads AS t
                   JOIN runs AS u ON u.principal = t.principal AND u.id = t.as_of_run
                   JOIN events AS e ON e.rid = u.rid AND e.seq = t.as_of_seq
                   WHERE t.tid = r.tid AND e.boundary = 1
                     AND u.status <> 'interrupted')) AS settled
FROM (SELECT DISTINCT (x->>0)::bigint AS tid FROM jsonb_array_elements(:rows::jsonb) AS x) AS r
UNION ALL
SELECT m.tid, m.id, NULL, NULL
FROM jsonb_array_elements(:rows::jsonb) AS x
JOIN messages AS m ON m.tid = (x->>0)::bigint AND m.id = x->>1;

-- name: messages_by_id
-- The thread's messages with the ids of :ids (a JSON array of strings), by key: an
-- input that resends a few messages of a long thread is checked against those alone.
SELECT m.id, m.body FROM messages AS m JOIN threads AS t ON t.tid = m.tid
WHERE t.principal = :principal AND t.id = :thread_id
  AND m.id IN (SELECT jsonb_array_elements_text(:ids::jsonb));

-- name: usage_insert_batch
-- The tokens of a commit's model calls: :rows is a JSON array of [rid, attempt, at,
-- provider, model, input, output, total, reasoning, cached].
INSERT INTO token_usage (rid, principal, thread_id, run_id, attempt, at, provider, model,
                         input_tokens, output_tokens, total_tokens, reasoning_tokens,
                         cached_tokens)
SELECT r.rid, r.principal, r.thread_id, r.id, (x->>1)::int, (x->>2)::double precision,
       x->>3, x->>4, (x->>5)::bigint, (x->>6)::bigint, (x->>7)::bigint, (x->>8)::bigint,
       (x->>9)::bigint
FROM jsonb_array_elements(:rows::jsonb) AS x JOIN runs AS r ON r.rid = (x->>0)::bigint;

-- name: principal_lock
-- Serialize a principal's admissions across processes while limits are checked (held to
-- the end of the transaction).
SELECT pg_advisory_xact_lock(hashtext(:principal)) IS NULL AS locked;
