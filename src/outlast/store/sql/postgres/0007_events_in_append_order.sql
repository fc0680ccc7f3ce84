-- outlast schema, version 7 (PostgreSQL): nothing to change. SQLite's version 7 moves
-- its log from a table clustered by (rid, seq) into one in append order, with
-- (rid, seq) as an index beside it; PostgreSQL's heap tables have always been that.
-- Numbered so that both backends' versions keep meaning the same schema.
SELECT 1;
