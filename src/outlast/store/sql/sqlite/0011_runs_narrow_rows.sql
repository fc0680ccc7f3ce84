-- outlast schema, version 11 (SQLite): nothing to change. PostgreSQL's version 11 keeps
-- a run's long input out of its row, as SQLite's version 8 keeps last_seq out of it.
-- Numbered so that both backends' versions keep meaning the same schema.
SELECT 1;
