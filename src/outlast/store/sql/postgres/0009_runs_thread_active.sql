-- outlast schema, version 9: a thread's queued and running runs without its others.
--
-- Admission, every claim and every run's end ask whether a thread has a run queued or
-- running (runs_active_for_thread, run_claim_queued, thread_refresh_status). Through
-- runs_thread (tid, rid) that meant reading every run the thread ever had: 2.5 ms per
-- question on a thread of 3,000 turns whose clients resent their history, and more
-- with every turn. This index holds only the live ones.
CREATE INDEX runs_thread_active ON runs (tid, rid) WHERE status IN ('queued', 'running');
