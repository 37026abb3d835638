-- 0027: children (`run.step.enqueue` / `run.step.wait` / `run.step.gather`, issue 37).
-- `parent_id` is the job that enqueued this one as a step; `parent_detached` keeps the child
-- alive when its parent is cancelled (`detached=True`). `parent_waits` is set on a live child
-- by its parent's wait (children_mark.sql); `children_waited` is, on the parent, how many of
-- its marked children are still live. The statement that finishes a marked child takes one off
-- its parent's count and, at zero, makes a suspended parent due now (a parent still running
-- keeps the zero, and its suspending nack makes it due at once instead): one wake per wait, not
-- one per child. Every column is nullable without a default: no table rewrite, and the hot
-- settle of a row that is nobody's child reads a null and joins nothing.
alter table x_jobs add column parent_id text;
alter table x_jobs add column parent_detached boolean;
alter table x_jobs add column parent_waits boolean;
alter table x_jobs add column children_waited int;

-- "The children of X": the wait's read, the cancel's cascade and the job page's list. Partial:
-- a row that is nobody's child never enters it.
create index x_jobs_parent_idx on x_jobs (parent_id, created_at, id) where parent_id is not null;
