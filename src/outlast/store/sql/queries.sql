-- Named queries shared by every dialect; parameters are written :name (PostgreSQL
-- gets $n). Queries that truly differ between dialects (row locks, aggregates) live
-- in <dialect>/queries.sql, which wins over this file; the loader refuses a dialect
-- that lacks a name another one has.
-- Lock order (PostgreSQL, where several processes share one database): statements
-- that wait for row locks take them in one order, so no two transactions wait for
-- each other in a cycle: a thread before its runs, and runs of different threads in
-- rid order. Lease claims never wait (FOR UPDATE SKIP LOCKED).

-- name: thread_get
-- A thread by principal and id.
SELECT * FROM threads WHERE principal = :principal AND id = :id;

-- name: thread_get_tid
-- A thread by its internal key.
SELECT * FROM threads WHERE tid = :tid;

-- name: thread_insert
-- Create a thread if it does not exist yet (a concurrent creator waits for the first).
INSERT INTO threads (principal, id, title, created_at, updated_at)
VALUES (:principal, :id, :title, :now, :now)
ON CONFLICT (principal, id) DO NOTHING;

-- name: thread_refresh_status
-- Derive the thread's status from its runs and interrupts.
UPDATE threads SET
    status = CASE
        WHEN EXISTS (SELECT 1 FROM runs r WHERE r.tid = :tid AND r.status IN ('queued', 'running'))
            THEN 'busy'
        WHEN EXISTS (SELECT 1 FROM interrupts i WHERE i.tid = :tid AND i.status = 'pending')
            THEN 'interrupted'
        WHEN (SELECT r.status FROM runs r WHERE r.tid = :tid ORDER BY r.rid DESC LIMIT 1) = 'failed'
            THEN 'error'
        ELSE 'idle' END,
    updated_at = :now
WHERE tid = :tid;

-- name: thread_list
-- The principal's threads, newest first, optionally by status, keyset-paginated on
-- (updated_at, id): the cursor carries only what the principal already sees.
SELECT * FROM threads
WHERE principal = :principal
  AND (CAST(:status AS TEXT) IS NULL OR status = :status)
  AND (CAST(:before_updated AS DOUBLE PRECISION) IS NULL OR updated_at < :before_updated
       OR (updated_at = :before_updated AND id < CAST(:before_id AS TEXT)))
ORDER BY updated_at DESC, id DESC
LIMIT :limit;

-- name: thread_delete
-- Delete a thread; runs, events, messages and interrupts cascade.
DELETE FROM threads WHERE tid = :tid;

-- name: messages_list
-- The snapshot's messages in order.
SELECT id, position, body FROM messages WHERE tid = :tid ORDER BY position;

-- name: message_upsert
-- Write one new or changed message of a snapshot.
INSERT INTO messages (tid, id, position, body) VALUES (:tid, :id, :position, :body)
ON CONFLICT (tid, id) DO UPDATE SET position = excluded.position, body = excluded.body;

-- name: runs_active_for_thread
-- The thread's queued and running runs, oldest first.
SELECT * FROM run_records WHERE tid = :tid AND status IN ('queued', 'running') ORDER BY rid;

-- name: run_get
-- A run by principal and id.
SELECT * FROM run_records WHERE principal = :principal AND id = :id;

-- name: run_get_rid
-- A run by its internal key.
SELECT * FROM run_records WHERE rid = :rid;

-- name: run_insert
-- Admit a run; returned as run_records has it, without the input its caller holds.
INSERT INTO runs (principal, id, tid, thread_id, agent, status, idempotency_key, fingerprint,
                  input, options, created_at, protocol_version)
VALUES (:principal, :id, :tid, :thread_id, :agent, :status, :idempotency_key, :fingerprint,
        :input, :options, :now, :protocol_version)
RETURNING rid, principal, id, tid, thread_id, agent, status, idempotency_key, fingerprint,
          options, created_at, started_at, finished_at, attempts, last_seq, outcome, error,
          lease_holder, lease_expires_at, cancel_requested, compacted_at, protocol_version;

-- name: runs_list_thread
-- A thread's runs, newest first, keyset-paginated.
SELECT * FROM run_records WHERE tid = :tid AND (CAST(:before_rid AS BIGINT) IS NULL OR rid < :before_rid)
ORDER BY rid DESC LIMIT :limit;

-- name: admission_keys
-- The run admitted under an idempotency key (rid and fingerprint, NULL if none), and
-- whether :run_id names a run already: one trip for admission's two identity checks.
SELECT i.rid, i.fingerprint,
       EXISTS (SELECT 1 FROM runs AS r WHERE r.principal = :principal AND r.id = :run_id)
           AS run_id_taken
FROM (SELECT 1 AS one) AS x
LEFT JOIN idempotency AS i ON i.principal = :principal AND i.key = :key;

-- name: idempotency_insert
-- Record the key of an admitted run (the primary key refuses a duplicate: G3).
INSERT INTO idempotency (principal, key, rid, fingerprint, created_at)
VALUES (:principal, :key, :rid, :fingerprint, :now);

-- name: idempotency_prune
-- Forget idempotency keys older than the retention.
DELETE FROM idempotency WHERE created_at < :cutoff;

-- name: run_release_lease
-- Give a run up so another process resumes it at once (clean shutdown).
UPDATE runs SET lease_holder = NULL, lease_expires_at = 0, attempts = attempts - 1
WHERE rid = :rid AND lease_holder = :instance AND attempts = :attempt AND status = 'running';

-- name: event_insert
-- Append one event to a run's log.
INSERT INTO events (rid, seq, boundary, body) VALUES (:rid, :seq, :boundary, :body);

-- name: events_after
-- A page of a run's log after a seq.
SELECT seq, boundary, body FROM events WHERE rid = :rid AND seq > :after
ORDER BY seq LIMIT :limit;

-- name: run_finish
-- End a run (the lease is dropped with it).
UPDATE runs SET status = :status, outcome = :outcome, error = :error, finished_at = :now,
    lease_holder = NULL, lease_expires_at = NULL
WHERE rid = :rid;

-- name: run_seq_set
-- Set a run's last seq outside a commit of the writer (a queued run cancelled).
UPDATE runs SET last_seq = :last_seq WHERE rid = :rid;

-- name: run_request_cancel
-- Ask an active run to stop (idempotent).
UPDATE runs SET cancel_requested = 1 WHERE rid = :rid AND status IN ('queued', 'running');

-- name: interrupt_insert
-- Store a pending interrupt with its thread (G7).
INSERT INTO interrupts (tid, id, rid, run_id, body, expires_ts, status)
VALUES (:tid, :id, :rid, :run_id, :body, :expires_ts, 'pending')
ON CONFLICT (tid, id) DO UPDATE SET rid = excluded.rid, run_id = excluded.run_id,
    body = excluded.body, expires_ts = excluded.expires_ts, status = 'pending',
    answered_by = NULL, answered_at = NULL, resolution = NULL, continuation_rid = NULL;

-- name: interrupts_pending_for_thread
-- A thread's pending interrupts, in the order they were raised.
SELECT * FROM interrupts WHERE tid = :tid AND status = 'pending' ORDER BY raised;

-- name: interrupts_for_thread
-- Every interrupt of a thread, in the order they were raised.
SELECT * FROM interrupts WHERE tid = :tid ORDER BY raised;

-- name: interrupts_for_run
-- Every interrupt a run raised, on its own thread (a fork's copies stay the fork's).
SELECT * FROM interrupts WHERE rid = :rid AND tid = (SELECT tid FROM runs WHERE rid = :rid)
ORDER BY raised;

-- name: interrupts_resolved_by_run
-- The interrupts a continuation run answers.
SELECT * FROM interrupts WHERE continuation_rid = :rid ORDER BY raised;

-- name: interrupt_get
-- One interrupt of a thread.
SELECT * FROM interrupts WHERE tid = :tid AND id = :id;

-- name: interrupt_answer
-- Single-use answer: only a pending interrupt changes (G7).
UPDATE interrupts SET status = :status, answered_by = :answered_by, answered_at = :now,
    resolution = :resolution, continuation_rid = :continuation_rid
WHERE tid = :tid AND id = :id AND status = 'pending';

-- name: effect_get
-- The journal entry of one effect of a run.
SELECT * FROM effects WHERE rid = :rid AND key = :key;

-- name: effect_start
-- Journal that an effect is about to run (G9).
INSERT INTO effects (rid, key, attempt, status, started_at)
VALUES (:rid, :key, :attempt, 'started', :now)
ON CONFLICT (rid, key) DO UPDATE SET attempt = excluded.attempt, status = 'started',
    started_at = excluded.started_at
WHERE effects.status <> 'completed';

-- name: effect_complete
-- Journal an effect's result.
UPDATE effects SET status = 'completed', result = :result, completed_at = :now
WHERE rid = :rid AND key = :key;

-- name: schema_migrations_create
-- The table of applied migrations (created before the first one runs).
CREATE TABLE IF NOT EXISTS schema_migrations (
    version INTEGER PRIMARY KEY, applied_at DOUBLE PRECISION NOT NULL);

-- name: schema_version_get
-- The applied schema version (0 before the first migration).
SELECT COALESCE(MAX(version), 0) AS version FROM schema_migrations;

-- name: schema_version_touch
-- A write that changes nothing (the newest migration's row rewritten as it is): it
-- needs the log space any write needs, so it tells whether the store writes again.
UPDATE schema_migrations SET applied_at = applied_at
WHERE version = (SELECT MAX(version) FROM schema_migrations);

-- name: schema_version_insert
-- Record a migration as applied, in its own transaction.
INSERT INTO schema_migrations (version, applied_at) VALUES (:version, :now);

-- name: run_expire_lease
-- Give a run up after an engine failure: it counts as an attempt, and any
-- process (this one included) may take it over at once.
UPDATE runs SET lease_holder = NULL, lease_expires_at = 0
WHERE rid = :rid AND lease_holder = :instance AND attempts = :attempt AND status = 'running';

-- constructs --

-- name: event_last_boundary
-- The latest boundary at or before a seq (the events_boundaries index finds it).
SELECT seq FROM events WHERE rid = :rid AND seq <= :upto AND boundary = 1
ORDER BY seq DESC LIMIT 1;

-- name: constructs_open_at
-- The constructs open just after a seq, in opening order: only those opened since
-- the latest boundary at or before it (where nothing was open) can be.
SELECT ckey, body FROM constructs
WHERE rid = :rid AND opened_seq <= :after
  AND (closed_seq IS NULL OR closed_seq > :after)
  AND opened_seq > COALESCE((SELECT seq FROM events
                             WHERE rid = :rid AND seq <= :after AND boundary = 1
                             ORDER BY seq DESC LIMIT 1), 0)
ORDER BY opened_seq, ord;

-- name: events_state_between
-- The state events of a run's log from one seq to another (a row of the state index
-- spans at most 64 events; only the state events among them are sent back).
SELECT seq, boundary, body FROM events
WHERE rid = :rid AND seq >= :first AND seq <= :upto AND body LIKE '%"type":"STATE_%'
ORDER BY seq;

-- name: run_state_at
-- The state row a seq's state is folded from: the latest at or before it.
SELECT seq, upto, body FROM run_states
WHERE rid = :rid AND seq <= :after
ORDER BY seq DESC LIMIT 1;

-- retention --
-- spec §6: the events of runs final for longer than the window go, in batches of
-- short transactions; the run records and the thread snapshots stay. Queries that
-- take a JSON array of rids or count bytes are spelled per dialect.

-- name: runs_compactable
-- Final runs whose events are still kept and that ended before the cutoff, oldest first.
SELECT rid, last_seq FROM runs
WHERE compacted_at IS NULL AND finished_at IS NOT NULL AND finished_at < :cutoff
ORDER BY finished_at LIMIT :limit;

-- name: compacting_next
-- A compacted run whose events are not all removed yet.
SELECT rid FROM compacting ORDER BY rid LIMIT 1;

-- name: compacting_insert
-- Remember a compacted run whose events go over several batches.
INSERT INTO compacting (rid) VALUES (:rid);

-- name: compacting_delete
-- Forget a compacted run once its last event is gone.
DELETE FROM compacting WHERE rid = :rid;

-- name: events_first_seq
-- The first event a run still has (NULL when none).
SELECT MIN(seq) AS seq FROM events WHERE rid = :rid;

-- name: events_delete_upto
-- Remove a run's events up to a seq (one batch of a long log).
DELETE FROM events WHERE rid = :rid AND seq <= :upto;

-- name: constructs_delete_upto
-- Remove the construct index of a compacted run's events up to a seq.
DELETE FROM constructs WHERE rid = :rid AND opened_seq <= :upto;

-- name: run_states_delete_upto
-- Remove the state index of a compacted run's events up to a seq.
DELETE FROM run_states WHERE rid = :rid AND seq <= :upto;
-- fork --

-- name: fork_thread_insert
-- Create a fork with its snapshot's state; nothing when the principal has the id already.
INSERT INTO threads (principal, id, title, created_at, updated_at, state, session_state,
                     forked_from)
VALUES (:principal, :id, :title, :now, :now, :state, :session_state, :forked_from)
ON CONFLICT (principal, id) DO NOTHING
RETURNING tid;

-- name: fork_base_insert
-- Keep the snapshot a fork started from (its older boundaries fold onto it).
INSERT INTO fork_bases (tid, messages, state) VALUES (:tid, :messages, :state);

-- name: fork_base_get
-- The snapshot a fork started from.
SELECT messages, state FROM fork_bases WHERE tid = :tid;

-- name: fork_interrupt_insert
-- Copy an interrupt pending at the fork point; it stays attributed to the run that
-- raised it.
INSERT INTO interrupts (tid, id, rid, run_id, body, expires_ts, status)
VALUES (:tid, :id, :rid, :run_id, :body, :expires_ts, 'pending');

-- name: fork_runs_upto
-- A thread's runs up to and including one, in the order they ran.
SELECT * FROM run_records WHERE tid = :tid AND rid <= :rid ORDER BY rid;

-- webhooks --
-- The outbox of G12: rows are inserted with a run's end, claimed by one statement
-- (webhook_claim, per dialect: SKIP LOCKED on PostgreSQL) and settled fenced by the
-- claim's principal and attempt, so a process whose lease ran out changes nothing.

-- name: webhook_insert
-- Record a delivery owed for a run's end, in the transaction that ends the run (G12).
INSERT INTO webhooks (rid, id, url, type, body, created_at, expires_at, next_at)
VALUES (:rid, :id, :url, :type, :body, :now, :expires_at, :now);

-- name: webhook_settle
-- The end of one attempt: delivered, due again at :next_at, or expired; only for
-- the holder of this attempt's lease.
UPDATE webhooks SET status = :status, next_at = :next_at, lease_holder = NULL,
    last_status = :last_status, last_error = :last_error, delivered_at = :delivered_at
WHERE wid = :wid AND lease_holder = :instance AND attempts = :attempt AND status = 'pending';

-- name: webhook_release
-- Make in-flight deliveries due now: this instance's own (stopping), or, with
-- :others = 1, every other instance's (SQLite's directory lock proves them gone).
UPDATE webhooks SET lease_holder = NULL, next_at = :now
WHERE status = 'pending' AND lease_holder IS NOT NULL
  AND ((:others = 0 AND lease_holder = :instance) OR (:others = 1 AND lease_holder <> :instance));

-- name: webhook_outlook
-- When the earliest pending delivery is due (NULL when none is owed), and how many are
-- owed: one read of the partial index of pending rows.
SELECT MIN(next_at) AS next_at, COUNT(*) AS backlog FROM webhooks WHERE status = 'pending';

-- name: webhooks_for_run
-- A run's deliveries, in the order they were recorded.
SELECT * FROM webhooks WHERE rid = :rid ORDER BY wid;

-- usage --

-- name: usage_for_run
-- A run's tokens over all its attempts, per provider and model, in the order first used.
SELECT provider, model, SUM(input_tokens) AS input_tokens,
       SUM(output_tokens) AS output_tokens, SUM(total_tokens) AS total_tokens,
       SUM(reasoning_tokens) AS reasoning_tokens, SUM(cached_tokens) AS cached_tokens,
       COUNT(*) AS calls
FROM token_usage WHERE rid = :rid GROUP BY provider, model ORDER BY MIN(uid);

-- name: usage_by_model
-- A principal's tokens in [since, until), per provider and model.
SELECT provider, model, SUM(input_tokens) AS input_tokens,
       SUM(output_tokens) AS output_tokens, SUM(total_tokens) AS total_tokens,
       SUM(reasoning_tokens) AS reasoning_tokens, SUM(cached_tokens) AS cached_tokens,
       COUNT(*) AS calls
FROM token_usage WHERE principal = :principal AND at >= :since AND at < :until
GROUP BY provider, model ORDER BY SUM(total_tokens) DESC;

-- name: usage_by_thread
-- A principal's tokens in [since, until), per thread, the largest first.
SELECT thread_id, SUM(input_tokens) AS input_tokens,
       SUM(output_tokens) AS output_tokens, SUM(total_tokens) AS total_tokens,
       SUM(reasoning_tokens) AS reasoning_tokens, SUM(cached_tokens) AS cached_tokens,
       COUNT(*) AS calls
FROM token_usage WHERE principal = :principal AND at >= :since AND at < :until
GROUP BY thread_id ORDER BY SUM(total_tokens) DESC, thread_id LIMIT :limit;

-- name: usage_total_since
-- A principal's tokens since a time, and when the oldest of them was spent; those of run
-- :rid left out (a running run counts its own).
SELECT COALESCE(SUM(total_tokens), 0) AS total, MIN(at) AS oldest
FROM token_usage WHERE principal = :principal AND at >= :since AND (rid IS NULL OR rid <> :rid);

-- limits --

-- name: owner_active_runs
-- How many runs a principal has queued or running (the runs_active partial index).
SELECT COUNT(*) AS n FROM runs
WHERE principal = :principal AND status IN ('queued', 'running');

-- name: owner_runs_since
-- How many runs a principal created since a time, and when the oldest of them was.
SELECT COUNT(*) AS n, MIN(created_at) AS oldest FROM runs
WHERE principal = :principal AND created_at >= :since;
