-- enqueue_many: N jobs, one statement, each still deduped by its id and its live key (the
-- driver collapses repeats inside the batch before sending it). Dedupe is ON CONFLICT DO
-- NOTHING (index probes whatever the plan); the holder of a row that was not inserted is then
-- looked up by id, else by live key, and answered with deduped = true. A row that answers no
-- id was raced by a concurrent enqueue committed after this snapshot: the driver resends it.
-- One wake per queue that gained a row due within 1 s, throttled per 250 ms slot.
-- $1 the jobs, one JSON array of objects (one parameter: no per-element array encoding, and
-- each input travels as JSON inside it)  $2 now ms  $3 wake slot  $4 due-by ms
with req as (
  select *
    from rows from (jsonb_to_recordset($1::text::jsonb)
                    as (id text, run_id text, name text, queue text, input jsonb,
                        tenant_id text, idempotency_key text, max_attempts int,
                        run_at_ms bigint, traceparent text, enqueued_by text))
         with ordinality as r(id, run_id, name, queue, input, tenant_id, idempotency_key,
                              max_attempts, run_at_ms, traceparent, enqueued_by, ord)
),
inserted as (
  insert into x_jobs (id, run_id, name, queue, state, input, tenant_id, idempotency_key,
                      max_attempts, run_at, created_at, updated_at, traceparent, enqueued_by)
  select r.id, r.run_id, r.name, r.queue,
         case when r.run_at_ms > $2::bigint then 'delayed' else 'ready' end,
         r.input, r.tenant_id, r.idempotency_key, r.max_attempts,
         x_ts(r.run_at_ms), x_ts($2::bigint), x_ts($2::bigint), r.traceparent, r.enqueued_by
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
answered as (
  select r.*, i.id as new_id, i.run_id as new_run_id
    from req r left join inserted i on i.id = r.id
)
select a.ord, coalesce(a.new_id, h.id) as id, coalesce(a.new_run_id, h.run_id) as run_id,
       a.new_id is null as deduped, (select count(*) from woke) as woke
  from answered a
  left join lateral (
    (select j.id, j.run_id from x_jobs j where a.new_id is null and j.id = a.id)
    union all
    (select j.id, j.run_id from x_jobs j
      where a.new_id is null
        and j.name = a.name
        and coalesce(j.tenant_id, '') = coalesce(a.tenant_id, '')
        and j.idempotency_key = a.idempotency_key
        and j.state in ('ready', 'delayed', 'running', 'suspended'))
    limit 1) h on true
 order by a.ord
