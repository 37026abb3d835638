-- 0021: each counted failed attempt's error, not only the last (the dashboard's and
-- `ujobs jobs show`'s attempt history). A JSON array of {"attempt", "error", "atMs"}, oldest
-- first, the newest ATTEMPT_ERRORS_KEPT (10) kept, each error cut to ATTEMPT_ERROR_CHARS
-- (4,000); nack.sql and settlements_nack.sql append to it in the statement that settles the
-- attempt. A constant default adds the column without rewriting the table; rows from before
-- start with an empty history (their last_error stays).
alter table x_jobs add column attempt_errors jsonb not null default '[]'::jsonb;
