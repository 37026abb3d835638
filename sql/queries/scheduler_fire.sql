-- scheduler_fire (SQL_SCHEDULER_FIRE): one occurrence of a task, in ONE statement. The
-- watermark moves, the occurrence's jobs are inserted and the fire is recorded together, or
-- nothing happens: a crash between them cannot fire it twice.
-- The watermark moves only while it is still BEFORE the occurrence. Two schedulers racing:
-- the second blocks on the row until the first commits, then re-checks against the committed
-- watermark and moves nothing (fired = false), so its jobs are never inserted.
-- The jobs dedupe like enqueue_many: an id that names a row, or a live row holding the
-- (name, tenant, key), inserts nothing (the keys carry the occurrence).
-- The wake: pg_notify('x_jobs_wake', queue) once per queue the occurrence filled; silent when
-- the watermark refused the fire. `due_queues` names the queues that gained a row due now, for
-- the caller to wake this process and announce on Redis (a LISTEN-less worker hears only that).
-- `found` carries each request with its holder, so `inserted` reads it alone: joined back to
-- `req` on ord, a plan may nest the two scans and re-read the batch once per job (a custom
-- plan did; tests/integration/test_postgres_fire_plan.py holds it to one pass).
-- $1 task  $2 occurrence ms  $3 new watermark ms (>= $2)  $4 now ms
-- $5..$15 arrays, one element per job: id, run_id, name, queue, input (json text), tenant_id,
-- idempotency_key, max_attempts, run_at ms, traceparent, enqueued_by, priority ($16)
with moved as (
  insert into x_scheduler_state as s (task, watermark_ms, updated_at)
  values ($1::text, $3::bigint, x_ts($4::bigint))
  on conflict (task) do update
     set watermark_ms = excluded.watermark_ms, updated_at = excluded.updated_at
   where s.watermark_ms < $2::bigint
  returning s.task
),
req as (
  select r.*
    from unnest($5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[],
                $11::text[], $12::int[], $13::bigint[], $14::text[], $15::text[],
                $16::smallint[])
         with ordinality as r(id, run_id, name, queue, input, tenant_id, idempotency_key,
                              max_attempts, run_at_ms, traceparent, enqueued_by, priority, ord)
   where exists (select 1 from moved)
),
found as (
  select r.*, coalesce(b.id, k.id) as holder
    from req r
    left join lateral (select j.id from x_jobs j where j.id = r.id) b on true
    left join lateral (
      select j.id from x_jobs j
       where j.name = r.name
         and coalesce(j.tenant_id, '') = coalesce(r.tenant_id, '')
         and j.idempotency_key = r.idempotency_key
         and j.state in ('ready', 'delayed', 'running', 'suspended')
       limit 1) k on true
),
inserted as (
  insert into x_jobs (id, run_id, name, queue, state, input, tenant_id, idempotency_key,
                      max_attempts, run_at, created_at, updated_at, traceparent, enqueued_by,
                      priority)
  select r.id, r.run_id, r.name, r.queue,
         case when r.run_at_ms > $4::bigint then 'delayed' else 'ready' end,
         r.input::jsonb, r.tenant_id, r.idempotency_key, r.max_attempts,
         x_ts(r.run_at_ms), x_ts($4::bigint), x_ts($4::bigint), r.traceparent, r.enqueued_by,
         r.priority
    from found r
   where r.holder is null
   order by r.ord
  on conflict do nothing
  returning id, queue, state
),
recorded as (
  insert into x_task_fires as f (task, occurrence_ms, fired_at_ms)
  select $1::text, $2::bigint, $4::bigint where exists (select 1 from moved)
  on conflict (task) do update
     set occurrence_ms = excluded.occurrence_ms, fired_at_ms = excluded.fired_at_ms
   where f.occurrence_ms <= excluded.occurrence_ms
  returning f.task
),
woke as (
  select pg_notify('x_jobs_wake', q.queue) from (select distinct i.queue from inserted i) q
)
select exists (select 1 from moved) as fired,
       (select count(*) from inserted) as inserted,
       (select count(*) from recorded) as recorded,
       (select count(*) from woke) as woke,
       array(select distinct i.queue from inserted i where i.state = 'ready' order by 1)
         as due_queues
