-- outlast schema, version 13: the shared state a run's log holds at any seq, found
-- without folding the log (spec §4: a reattach sends the state as of its cursor).
-- Each row covers state events (STATE_SNAPSHOT, STATE_DELTA) of one commit spanning
-- at most 64 events: the state just before the first of them (seq) and the seq of
-- the last (upto). The state after any seq is the latest row at or before it, with
-- the row's state events up to the seq applied: at most 64 events are read. Written
-- in the same transaction as the events.
CREATE TABLE run_states (
    rid  BIGINT NOT NULL REFERENCES runs (rid) ON DELETE CASCADE,
    seq  BIGINT NOT NULL,
    upto BIGINT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (rid, seq)
);
