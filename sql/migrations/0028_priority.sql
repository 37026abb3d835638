-- 0028: priority (`@job(priority=…)`, `enqueue(priority=…)`, issue 38 item 1): 0..9, 0 first,
-- default 0. The claim hands out due rows by (priority, run_at, seq) across all of a worker's
-- queues. A constant default is no table rewrite; the check scans the table once, here.
alter table x_jobs add column priority smallint not null default 0
  constraint x_jobs_priority_check check (priority between 0 and 9);

-- What the claim walks now: one queue's claimable rows of one band in hand-out order. Its
-- partial predicate is x_jobs_claim_idx's, so a row enters and leaves both together.
-- x_jobs_claim_idx stays: the stats, the scaler's depth and queue_tenants read (queue, run_at)
-- across bands, which this index would serve only band by band.
create index x_jobs_claim_priority_idx on x_jobs (queue, priority, run_at, seq)
  where state in ('ready', 'delayed', 'suspended');

-- The outbox carries it from the staging transaction to the relay's enqueue.
alter table x_outbox add column priority smallint not null default 0
  constraint x_outbox_priority_check check (priority between 0 and 9);
