-- enqueue_many: N jobs, one statement, each still deduped by its id and its live key (the
-- driver collapses repeats inside the batch before sending it). Dedupe is ON CONFLICT DO
-- NOTHING (index probes whatever the plan); only the jobs that were not inserted come back,
-- each with its holder (by id, else by live key), to be answered deduped = true. One that
-- comes back with no holder was raced by a concurrent enqueue committed after this snapshot:
-- the driver resends it.
-- An input of JSON null arrives as SQL NULL from jsonb_to_recordset: stored as JSON null, as
-- enqueue.sql and the COPY (enqueue_many_copy.sql) store it.
-- One wake per queue that gained a row due within 1 s, throttled per 250 ms slot.
-- $1 the jobs, one JSON array of objects (one parameter: no per-element array encoding, and
-- each input travels as JSON inside it; slot_key: the fleet slot's lease key, 0032)  $2 now ms  $3 wake slot  $4 due-by ms
with req as (
  select *
    from rows from (jsonb_to_recordset($1::text::jsonb)
                    as (id text, run_id text, name text, queue text, input jsonb,
                        tenant_id text, idempotency_key text, max_attempts int,
                        run_at_ms bigint, traceparent text, enqueued_by text,
                        priority smallint, slot_key text))
         with ordinality as r(id, run_id, name, queue, input, tenant_id, idempotency_key,
                              max_attempts, run_at_ms, traceparent, enqueued_by, priority,
                              slot_key, ord)
),
inserted as (
  insert into x_jobs (id, run_id, name, queue, state, input, tenant_id, idempotency_key,
                      max_attempts, run_at, created_at, updated_at, traceparent, enqueued_by,
                      priority, slot_key)
  select r.id, r.run_id, r.name, r.queue,
         case when r.run_at_ms > $2::bigint then 'delayed' else 'ready' end,
         coalesce(r.input, 'null'::jsonb), r.tenant_id, r.idempotency_key, r.max_attempts,
         x_ts(r.run_at_ms), x_ts($2::bigint), x_ts($2::bigint), r.traceparent, r.enqueued_by,
         coalesce(r.priority, 0), r.slot_key
    from req r
   order by r.ord
  on conflict do nothing
  returning id, run_id, queue, run_at
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
),
skipped as (
  select r.* from req r where not exists (select 1 from inserted i where i.id = r.id)
)
-- One row per job that was NOT inserted (its holder's ids, or nulls when raced), plus one
-- summary row (ord 0) so the caller always hears how many announcements went out. A job not
-- listed was inserted under the ids the caller sent.
select s.ord, h.id, h.run_id, (select count(*) from woke) as woke
  from skipped s
  left join lateral (
    (select j.id, j.run_id from x_jobs j where j.id = s.id)
    union all
    (select j.id, j.run_id from x_jobs j
      where j.name = s.name
        and coalesce(j.tenant_id, '') = coalesce(s.tenant_id, '')
        and j.idempotency_key = s.idempotency_key
        and j.state in ('ready', 'delayed', 'running', 'suspended'))
    limit 1) h on true
union all
select 0, null, null, (select count(*) from woke)
