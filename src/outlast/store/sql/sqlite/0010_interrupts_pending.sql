-- outlast schema, version 10: a thread's pending interrupts without its answered ones.
--
-- Every admission lists the thread's pending interrupts (interrupts_pending_for_thread)
-- and every claim and run's end asks whether it has one (thread_refresh_status).
-- Through the primary key (tid, id) that read every interrupt the thread ever raised:
-- an agent whose tools need an approval raises one a turn, and at 3,000 turns a turn
-- cost 1.6-1.7x what it did on a new thread. This index holds only the pending ones,
-- in the order they were raised (G7).
CREATE INDEX interrupts_pending ON interrupts (tid, raised) WHERE status = 'pending';
