-- attempt_errors: one job's attempt history (migration 0021), oldest first; no row, no history.
-- $1 id
select j.attempt_errors::text as attempt_errors
  from x_jobs j
 where j.id = $1::text
