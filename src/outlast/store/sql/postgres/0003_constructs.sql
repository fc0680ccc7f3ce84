-- outlast schema, version 3: an index of the constructs (messages, tool calls,
-- reasoning, steps, subagents) each run's log opens and closes, so that a stream
-- can start at any seq by reading what is open there instead of folding the
-- events since the last safe boundary (spec §4: a reattach costs the same
-- wherever it lands). Written in the same transaction as the events.
CREATE TABLE constructs (
    rid        BIGINT NOT NULL REFERENCES runs (rid) ON DELETE CASCADE,
    opened_seq BIGINT NOT NULL,
    ord        INTEGER NOT NULL,
    ckey       TEXT    NOT NULL,
    closed_seq BIGINT,
    body       TEXT    NOT NULL,
    PRIMARY KEY (rid, opened_seq, ord)
);
CREATE INDEX constructs_open ON constructs (rid, ckey) WHERE closed_seq IS NULL;

-- The latest boundary at or before a seq, found without scanning the events
-- after it (a reattach in the middle of a long message).
CREATE INDEX events_boundaries ON events (rid, seq) WHERE boundary = 1;
