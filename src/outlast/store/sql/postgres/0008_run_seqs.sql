-- outlast schema, version 8 (PostgreSQL): nothing to change. SQLite's version 8 moves
-- each run's last_seq out of its runs row, which a long input spreads over overflow
-- pages, into a narrow table; PostgreSQL stores long inputs out of line already, and
-- an update of last_seq copies the short row. Numbered so that both backends'
-- versions keep meaning the same schema.
SELECT 1;
