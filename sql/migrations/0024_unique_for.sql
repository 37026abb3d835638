-- 0024: per-period uniqueness (`unique_for=`): a run enqueued with it records its period here,
-- and once done it still holds its (name, tenant, key) for that long after finished_at. Null
-- (every other run) adds nothing: a nullable column without a default is no table rewrite.
alter table x_jobs add column unique_for_ms bigint;

-- What an enqueue with unique_for reads: the newest done run of its key that was enqueued with
-- it. Partial on `unique_for_ms is not null`, so the hot paths pay only the predicate: a plain
-- enqueue inserts a ready row (outside the predicate) and a plain ack moves a row whose
-- unique_for_ms is null (outside it too); only the runs of jobs that declared unique_for enter
-- it, once, when they finish.
create index x_jobs_unique_done_idx
  on x_jobs (name, coalesce(tenant_id, ''), idempotency_key, finished_at)
  where state = 'done' and unique_for_ms is not null;
