-- Queries whose SQLite form differs from the shared ones in ../queries.sql.
-- One process owns the file and BEGIN IMMEDIATE serializes every writer, so these
-- need no row locks.
--
-- A run's last_seq lives in run_seqs, not in its runs row (0008_run_seqs.sql): a query
-- that returns a whole run takes it from there, as last_seq (the run_records view,
-- 0012_run_records.sql, does the same for the shared queries that read a run).

-- name: run_insert
-- Admit a run (the runs_seq trigger gives it its run_seqs row, at 0); returned as
-- run_records has it, without the input its caller holds.
INSERT INTO runs (principal, id, tid, thread_id, agent, status, idempotency_key, fingerprint,
                  input, options, created_at, protocol_version)
VALUES (:principal, :id, :tid, :thread_id, :agent, :status, :idempotency_key, :fingerprint,
        :input, :options, :now, :protocol_version)
RETURNING rid, principal, id, tid, thread_id, agent, status, idempotency_key, fingerprint,
          options, created_at, started_at, finished_at, attempts, 0 AS last_seq, outcome,
          error, lease_holder, lease_expires_at, cancel_requested, compacted_at,
          protocol_version;

-- name: run_seq_set
-- Set a run's last seq outside a commit of the writer (a queued run cancelled).
UPDATE run_seqs SET last_seq = :last_seq WHERE rid = :rid;

-- name: thread_lock
-- Serialize admissions on one thread (SQLite: BEGIN IMMEDIATE already does).
SELECT * FROM threads WHERE principal = :principal AND id = :id;

-- name: run_claim_queued
-- Lease the oldest queued run of every thread that has none running (one statement).
-- The status IN term is the runs_active index's own condition: SQLite uses a partial
-- index only for a query that repeats it, and otherwise read every run ever admitted.
UPDATE runs SET status = 'running', lease_holder = :instance, lease_expires_at = :expires,
    attempts = attempts + 1, started_at = COALESCE(started_at, :now)
WHERE rid IN (
    SELECT r.rid FROM runs r
    WHERE r.status IN ('queued', 'running') AND r.status = 'queued'
      AND r.rid = (SELECT MIN(q.rid) FROM runs q WHERE q.tid = r.tid AND q.status IN ('queued', 'running'))
    ORDER BY r.rid LIMIT :limit)
RETURNING *, (SELECT s.last_seq FROM run_seqs s WHERE s.rid = runs.rid) AS last_seq;

-- name: run_claim_expired
-- Take over running runs whose lease expired (or, with :all_foreign, every run
-- leased by another instance: SQLite proves its predecessor gone by a file lock).
UPDATE runs SET lease_holder = :instance, lease_expires_at = :expires, attempts = attempts + 1
WHERE rid IN (
    SELECT rid FROM runs
    WHERE status = 'running'
      AND (lease_holder IS NULL OR lease_expires_at < :now
           OR (:all_foreign = 1 AND lease_holder <> :instance))
    ORDER BY rid LIMIT :limit)
RETURNING *, (SELECT s.last_seq FROM run_seqs s WHERE s.rid = runs.rid) AS last_seq;

-- name: run_renew_leases
-- Heartbeat: extend the leases this instance holds (only those of :rids, a JSON
-- array, when given: runs it still executes); report cancel requests.
UPDATE runs SET lease_expires_at = :expires
WHERE lease_holder = :instance AND status = 'running'
  AND (:rids IS NULL OR rid IN (SELECT value FROM json_each(:rids)))
RETURNING rid, attempts, cancel_requested;

-- name: runs_fence_append
-- Fencing (G2, G8) for a whole commit: each run of the rows (Conn.rows: the VALUES
-- row repeated, [rid, instance, attempt, prev_seq, last_seq] each) moves its last_seq
-- only when this attempt holds the lease and its view of last_seq is current; the
-- rids that did. A commit writes the narrow run_seqs pages, and reads the leases from
-- runs_fence, not from the runs rows (a long input puts the lease columns on overflow
-- pages).
WITH b (rid, instance, attempt, prev_seq, last_seq) AS (VALUES (?, ?, ?, ?, ?))
UPDATE run_seqs SET last_seq = b.last_seq
FROM b
JOIN runs INDEXED BY runs_fence ON runs.rid = b.rid
WHERE run_seqs.rid = b.rid AND runs.lease_holder = b.instance AND runs.attempts = b.attempt
  AND runs.status = 'running' AND run_seqs.last_seq = b.prev_seq
RETURNING run_seqs.rid;

-- name: run_seqs_append
-- runs_fence_append for runs whose lease the commit knows held (store/sqlite_fence.py):
-- each run of the rows ([rid, prev_seq, last_seq] each, as Conn.rows binds them) moves
-- its last_seq only when its view of it is current; the rids that did.
WITH b (rid, prev_seq, last_seq) AS (VALUES (?, ?, ?))
UPDATE run_seqs SET last_seq = b.last_seq
FROM b
WHERE run_seqs.rid = b.rid AND run_seqs.last_seq = b.prev_seq
RETURNING run_seqs.rid;

-- name: run_cancel_queued
-- Cancel a run that never started (run_seq_set then counts the events it is given).
UPDATE runs SET status = 'cancelled', finished_at = :now, outcome = :outcome,
    cancel_requested = 1
WHERE rid = :rid AND status = 'queued'
RETURNING tid;

-- name: run_holds_lease
-- Fencing check before journaling an effect.
SELECT rid FROM runs WHERE rid = :rid AND lease_holder = :instance AND attempts = :attempt
  AND status = 'running';

-- name: events_frames_after
-- A page of a run's log, each event rendered as :head || seq || :sep || body || :tail
-- and concatenated in seq order by the database (replay's hot path).
SELECT MAX(seq) AS last_seq, COUNT(*) AS n,
       group_concat(:head || seq || :sep || body || :tail, '') AS text
FROM (SELECT seq, body FROM events WHERE rid = :rid AND seq > :after ORDER BY seq LIMIT :limit);

-- retention --

-- name: runs_compactable
-- Final runs whose events are still kept and that ended before the cutoff, oldest first.
SELECT r.rid, s.last_seq FROM runs r JOIN run_seqs s ON s.rid = r.rid
WHERE r.compacted_at IS NULL AND r.finished_at IS NOT NULL AND r.finished_at < :cutoff
ORDER BY r.finished_at LIMIT :limit;

-- name: runs_mark_compacted
-- Mark runs (a JSON array of rids) compacted: their events answer 410 from now on.
UPDATE runs SET compacted_at = :now
WHERE rid IN (SELECT value FROM json_each(:rids)) AND compacted_at IS NULL;

-- name: events_measure_runs
-- How many events the runs (a JSON array of rids) have, and their bytes.
SELECT COUNT(*) AS events, COALESCE(SUM(LENGTH(CAST(body AS BLOB))), 0) AS bytes
FROM events WHERE rid IN (SELECT value FROM json_each(:rids));

-- name: events_delete_runs
-- Remove every event of the runs (a JSON array of rids).
DELETE FROM events WHERE rid IN (SELECT value FROM json_each(:rids));

-- name: events_measure_upto
-- How many events a run has up to a seq, and their bytes.
SELECT COUNT(*) AS events, COALESCE(SUM(LENGTH(CAST(body AS BLOB))), 0) AS bytes
FROM events WHERE rid = :rid AND seq <= :upto;

-- name: retention_preview
-- What removing the events of runs final before the cutoff would free (a dry run),
-- with what is left of runs compacted over several batches.
SELECT COUNT(DISTINCT r.rid) AS runs, COUNT(e.rid) AS events,
       COALESCE(SUM(LENGTH(CAST(e.body AS BLOB))), 0) AS bytes
FROM runs r LEFT JOIN events e ON e.rid = r.rid
WHERE r.compacted_at IS NULL AND r.finished_at IS NOT NULL AND r.finished_at < :cutoff
UNION ALL
SELECT 0, COUNT(*), COALESCE(SUM(LENGTH(CAST(body AS BLOB))), 0)
FROM events WHERE rid IN (SELECT rid FROM compacting);

-- name: constructs_delete_runs
-- Remove the construct index of the runs (a JSON array of rids) with their events.
DELETE FROM constructs WHERE rid IN (SELECT value FROM json_each(:rids));

-- name: run_states_delete_runs
-- Remove the state index of the runs (a JSON array of rids) with their events.
DELETE FROM run_states WHERE rid IN (SELECT value FROM json_each(:rids));

-- webhooks --

-- name: webhook_claim
-- Lease due deliveries to :instance until :lease_until, counting the attempt; a due
-- one past its expiry ends 'expired' instead (one statement).
UPDATE webhooks SET
    status = CASE WHEN expires_at <= :now THEN 'expired' ELSE 'pending' END,
    lease_holder = CASE WHEN expires_at <= :now THEN NULL ELSE :instance END,
    attempts = attempts + CASE WHEN expires_at <= :now THEN 0 ELSE 1 END,
    next_at = :lease_until
WHERE wid IN (
    SELECT wid FROM webhooks WHERE status = 'pending' AND next_at <= :now
    ORDER BY next_at LIMIT :limit)
RETURNING *;

-- name: event_last_boundary
-- The latest boundary at or before a seq. SQLite's planner would walk the primary key
-- back through every event since (a long message's worth): the partial index is forced.
SELECT seq FROM events INDEXED BY events_boundaries
WHERE rid = :rid AND seq <= :upto AND boundary = 1
ORDER BY seq DESC LIMIT 1;

-- name: constructs_open_at
-- The constructs open just after a seq, in opening order (see the shared query; the
-- boundary lookup forces the partial index, as event_last_boundary does).
SELECT ckey, body FROM constructs
WHERE rid = :rid AND opened_seq <= :after
  AND (closed_seq IS NULL OR closed_seq > :after)
  AND opened_seq > COALESCE((SELECT seq FROM events INDEXED BY events_boundaries
                             WHERE rid = :rid AND seq <= :after AND boundary = 1
                             ORDER BY seq DESC LIMIT 1), 0)
ORDER BY opened_seq, ord;

-- name: events_insert_batch
-- Append a commit's events, [rid, seq, boundary, body] each (Conn.rows: the VALUES row
-- repeated, a statement per chunk; no JSON array for the bodies to be escaped into).
INSERT INTO events (rid, seq, boundary, body) VALUES (?, ?, ?, ?);

-- name: run_states_insert_batch
-- Index the state a commit's state events start from, [rid, seq, upto, state] each
-- (Conn.rows).
INSERT INTO run_states (rid, seq, upto, body) VALUES (?, ?, ?, ?);

-- name: constructs_open_batch
-- Index the constructs a commit's events opened, [rid, seq, ord, ckey, body, closed_seq]
-- each (Conn.rows; closed_seq when the same commit closed it, else null).
INSERT INTO constructs (rid, opened_seq, ord, ckey, body, closed_seq)
VALUES (?, ?, ?, ?, ?, ?);

-- name: constructs_close_batch
-- Close the constructs a commit's events closed, [rid, seq, ckey] each (Conn.rows, in
-- the order of the log: a chunk never holds a close later than the next chunk's).
-- Each open row takes the first close of its key after it opened (a key reused later
-- in the same commit is another row). Driven by the rows, each looked up in the
-- open-constructs index: a commit with a close for each of many runs costs linear
-- time (a correlated subquery over the rows cost quadratic).
WITH j (rid, seq, ckey) AS (VALUES (?, ?, ?))
UPDATE constructs SET closed_seq = b.seq
FROM (SELECT c.rid AS rid, c.opened_seq AS opened_seq, c.ord AS ord, MIN(j.seq) AS seq
      FROM j
      JOIN constructs AS c INDEXED BY constructs_open
        ON c.rid = j.rid AND c.ckey = j.ckey
       AND c.closed_seq IS NULL AND c.opened_seq < j.seq
      GROUP BY c.rid, c.opened_seq, c.ord) AS b
WHERE constructs.rid = b.rid AND constructs.opened_seq = b.opened_seq
  AND constructs.ord = b.ord;

-- name: messages_delete_batch
-- Drop messages of snapshots: :rows is a JSON array of [tid, id].
DELETE FROM messages
WHERE (tid, id) IN (SELECT value->>0, value->>1 FROM json_each(:rows));

-- name: messages_upsert_batch
-- Write new or changed messages of snapshots, [tid, id, position, body] each, each
-- (tid, id) once (Conn.rows: no message body escaped into a JSON array).
INSERT INTO messages (tid, id, position, body) VALUES (?, ?, ?, ?)
ON CONFLICT (tid, id) DO UPDATE SET position = excluded.position, body = excluded.body;

-- name: threads_snapshot_batch
-- Move snapshots' coordinates: :rows is a JSON array of
-- [tid, state, session_state, as_of_run, as_of_seq], each tid once; state columns
-- change only when given.
UPDATE threads SET
    state = COALESCE(b.state, threads.state),
    session_state = COALESCE(b.session_state, threads.session_state),
    as_of_run = b.as_of_run, as_of_seq = b.as_of_seq, updated_at = :now
FROM (SELECT value->>0 AS tid, value->>1 AS state, value->>2 AS session_state,
             value->>3 AS as_of_run, value->>4 AS as_of_seq
      FROM json_each(:rows)) AS b
WHERE threads.tid = b.tid;

-- name: messages_start_batch
-- What starting runs need of their threads: :rows is a JSON array of [tid, id] for
-- every message of the runs' inputs, and [tid, null] for each run. One row per tid
-- with its last message's position (NULL: it holds none) and whether it is settled:
-- provably no tool call awaits a result (it holds no message, or its snapshot is as of
-- a boundary of a run that did not end interrupted); a row for each id it holds.
SELECT r.tid AS tid, NULL AS id,
       (SELECT MAX(m.position) FROM messages AS m WHERE m.tid = r.tid) AS position,
       (NOT EXISTS (SELECT 1 FROM messages AS m WHERE m.tid = r.tid)
        OR EXISTS (SELECT 1 FROM threads AS t
                   JOIN runs AS u ON u.principal = t.principal AND u.id = t.as_of_run
                   JOIN events AS e ON e.rid = u.rid AND e.seq = t.as_of_seq
                   WHERE t.tid = r.tid AND e.boundary = 1
                     AND u.status <> 'interrupted')) AS settled
FROM (SELECT DISTINCT value->>0 AS tid FROM json_each(:rows)) AS r
UNION ALL
SELECT m.tid, m.id, NULL, NULL
FROM json_each(:rows) AS r JOIN messages AS m ON m.tid = r.value->>0 AND m.id = r.value->>1;

-- name: messages_by_id
-- The thread's messages with the ids of :ids (a JSON array of strings), by key: an
-- input that resends a few messages of a long thread is checked against those alone.
SELECT m.id, m.body FROM messages AS m JOIN threads AS t ON t.tid = m.tid
WHERE t.principal = :principal AND t.id = :thread_id
  AND m.id IN (SELECT value FROM json_each(:ids));

-- name: usage_insert_batch
-- The tokens of a commit's model calls: :rows is a JSON array of [rid, attempt, at,
-- provider, model, input, output, total, reasoning, cached].
INSERT INTO token_usage (rid, principal, thread_id, run_id, attempt, at, provider, model,
                         input_tokens, output_tokens, total_tokens, reasoning_tokens,
                         cached_tokens)
SELECT r.rid, r.principal, r.thread_id, r.id, value->>1, value->>2, value->>3, value->>4,
       value->>5, value->>6, value->>7, value->>8, value->>9
FROM json_each(:rows) JOIN runs AS r ON r.rid = value->>0;

-- name: principal_lock
-- Serialize a principal's admissions while limits are checked: SQLite's one writer does.
SELECT 1 AS locked;
