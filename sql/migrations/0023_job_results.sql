-- 0023: a job's result. `result` is the body's return value as JSON (null: none), written by
-- the ack that settles the row `done`, in the same statement; its size is capped by the worker
-- before it is sent (UJOBS_RESULT_MAX_BYTES). It lives in the row, so retention purges it with
-- its job. `result_waited` is set by a result wait (result_watch.sql) on a live row: the
-- statement that finishes such a row announces its id on `x_jobs_settled`; rows nobody waits
-- for notify nothing. Both columns are added without a default: no table rewrite.
alter table x_jobs add column result jsonb;
alter table x_jobs add column result_waited boolean;
