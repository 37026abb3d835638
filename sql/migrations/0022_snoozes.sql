-- 0022: how often a run snoozed (`raise Snooze(seconds)`: back to ready uncounted, no error).
-- The claim hands it to the worker, which dead-letters a run past MAX_SNOOZES with
-- X_JOB_SNOOZE_LIMIT instead of snoozing it again; a snoozing nack adds one; a requeue (a retry
-- by an operator) starts it again at zero. A constant default: no table rewrite.
alter table x_jobs add column snoozes int not null default 0;
