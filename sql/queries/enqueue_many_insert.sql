-- enqueue_many_insert: the common case of enqueue_many.sql as a plain INSERT: a batch none of
-- whose ids or live keys is taken. The driver sends it first; a unique violation (an id that
-- names a row, or a live key another row holds, from the primary key or
-- x_jobs_name_tenant_idempotency_live_idx) aborts the whole statement, nothing is inserted,
-- and the driver sends enqueue_many.sql, which dedupes row by row and answers the holders.
-- Dedupe is thus the same unique indexes either way; what this statement saves is the
-- speculative insertion of ON CONFLICT (an arbiter pre-check of both unique indexes and a
-- confirm record per row) and the anti-join that finds the rows not inserted: about 12 us and
-- 70 bytes of WAL per row on 500-row batches (sql/README.md).
-- The wake is enqueue_many.sql's: one per queue that gained a row due within 1 s, throttled
-- per 250 ms slot. Answers how many announcements went out (one row).
-- $1 the jobs, one JSON array of objects  $2 now ms  $3 wake slot  $4 due-by ms
with inserted as (
  insert into x_jobs (id, run_id, name, queue, state, input, tenant_id, idempotency_key,
                      max_attempts, run_at, created_at, updated_at, traceparent, enqueued_by)
  select r.id, r.run_id, r.name, r.queue,
         case when r.run_at_ms > $2::bigint then 'delayed' else 'ready' end,
         r.input, r.tenant_id, r.idempotency_key, r.max_attempts,
         x_ts(r.run_at_ms), x_ts($2::bigint), x_ts($2::bigint), r.traceparent, r.enqueued_by
    from rows from (jsonb_to_recordset($1::text::jsonb)
                    as (id text, run_id text, name text, queue text, input jsonb,
                        tenant_id text, idempotency_key text, max_attempts int,
                        run_at_ms bigint, traceparent text, enqueued_by text))
         with ordinality as r(id, run_id, name, queue, input, tenant_id, idempotency_key,
                              max_attempts, run_at_ms, traceparent, enqueued_by, ord)
   order by r.ord
  returning queue, run_at
),
woke as (
  insert into x_job_wake_slots as w (queue, slot)
  select d.queue, $3::bigint
    from (select distinct i.queue from inserted i where i.run_at <= x_ts($4::bigint)) d
   where $3::bigint is not null
     and not exists (select 1 from x_job_wake_slots s where s.queue = d.queue and s.slot >= $3::bigint)
   order by d.queue
  on conflict (queue) do update set slot = excluded.slot where w.slot < excluded.slot
  returning pg_notify('x_jobs_wake', w.queue)
)
select count(*) as woke from woke
