-- enqueue_many_new: enqueue_many.sql for a batch sent with onConflict 'error' (the api's
-- /batch): every job of the batch as a new row, or none of them. The jobs whose id names a row
-- or whose (name, tenant, key) a live row holds come back with that holder, and then nothing
-- is inserted; the driver raises X_JOB_DUPLICATE naming them. The insert has no ON CONFLICT:
-- a concurrent enqueue that took a key or an id after this statement's snapshot makes it fail
-- whole (a unique violation), and the driver sends it again, when the check sees that holder.
-- Repeats inside the batch are refused by the driver before it sends anything.
-- $1 the jobs, one JSON array of objects (as enqueue_many.sql)  $2 now ms  $3 wake slot
-- $4 due-by ms
with req as (
  select *
    from rows from (jsonb_to_recordset($1::text::jsonb)
                    as (id text, run_id text, name text, queue text, input jsonb,
                        tenant_id text, idempotency_key text, max_attempts int,
                        run_at_ms bigint, traceparent text, enqueued_by text,
                        priority smallint))
         with ordinality as r(id, run_id, name, queue, input, tenant_id, idempotency_key,
                              max_attempts, run_at_ms, traceparent, enqueued_by, priority,
                              ord)
),
held as (
  select r.ord, h.id
    from req r
    cross join lateral (
      (select j.id from x_jobs j where j.id = r.id)
      union all
      (select j.id from x_jobs j
        where j.name = r.name
          and coalesce(j.tenant_id, '') = coalesce(r.tenant_id, '')
          and j.idempotency_key = r.idempotency_key
          and j.state in ('ready', 'delayed', 'running', 'suspended'))
      limit 1) h
),
inserted as (
  insert into x_jobs (id, run_id, name, queue, state, input, tenant_id, idempotency_key,
                      max_attempts, run_at, created_at, updated_at, traceparent, enqueued_by,
                      priority)
  select r.id, r.run_id, r.name, r.queue,
         case when r.run_at_ms > $2::bigint then 'delayed' else 'ready' end,
         coalesce(r.input, 'null'::jsonb), r.tenant_id, r.idempotency_key, r.max_attempts,
         x_ts(r.run_at_ms), x_ts($2::bigint), x_ts($2::bigint), r.traceparent, r.enqueued_by,
         coalesce(r.priority, 0)
    from req r
   where not exists (select 1 from held)
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
-- One row per held job (its holder's id), plus one summary row (ord 0) with the announcements.
select h.ord, h.id, 0 as woke from held h
union all
select 0, null, (select count(*) from woke)
