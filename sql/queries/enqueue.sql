-- enqueue: one job, one statement.
-- Inserts nothing under an id that already names a row (live or finished: an outbox republish
-- meets the job the first publish made), nor under a (name, tenant, key) a live row holds:
-- ON CONFLICT DO NOTHING over the primary key and x_jobs_name_tenant_idempotency_live_idx,
-- which are index probes whatever plan is chosen. Only when nothing was inserted does the
-- statement look the holder up and answer its ids with deduped = true. When neither a new row
-- nor a holder comes back, a concurrent enqueue of the same id/key committed after this
-- statement's snapshot: the driver runs it again.
-- The wake: pg_notify('x_jobs_wake', queue) at most once per queue per 250 ms slot
-- ($13, null when the row is due more than 1 s out), never on a dedupe.
-- $1 id  $2 run_id  $3 name  $4 queue  $5 input (json text)  $6 tenant_id  $7 idempotency_key
-- $8 max_attempts  $9 run_at ms  $10 now ms  $11 traceparent  $12 enqueued_by  $13 wake slot
-- $14 priority  $15 slot_key (the fleet slot's lease key, 0032; null: none or not known)
with inserted as (
  insert into x_jobs (id, run_id, name, queue, state, input, tenant_id, idempotency_key,
                      max_attempts, run_at, created_at, updated_at, traceparent, enqueued_by,
                      priority, slot_key)
  values ($1::text, $2::text, $3::text, $4::text,
          case when $9::bigint > $10::bigint then 'delayed' else 'ready' end,
          $5::text::jsonb, $6::text, $7::text, $8::int,
          x_ts($9::bigint), x_ts($10::bigint), x_ts($10::bigint), $11::text, $12::text,
          $14::smallint, $15::text)
  on conflict do nothing
  returning id, run_id, queue
),
found as (
  select h.id, h.run_id
    from (select 1) one
    cross join lateral (
      (select j.id, j.run_id from x_jobs j where j.id = $1::text)
      union all
      (select j.id, j.run_id from x_jobs j
        where j.name = $3::text
          and coalesce(j.tenant_id, '') = coalesce($6::text, '')
          and j.idempotency_key = $7::text
          and j.state in ('ready', 'delayed', 'running', 'suspended'))
      limit 1) h
   where not exists (select 1 from inserted)
),
woke as (
  insert into x_job_wake_slots as w (queue, slot)
  select i.queue, $13::bigint from inserted i
   where $13::bigint is not null
     and not exists (select 1 from x_job_wake_slots s where s.queue = i.queue and s.slot >= $13::bigint)
  on conflict (queue) do update set slot = excluded.slot where w.slot < excluded.slot
  returning pg_notify('x_jobs_wake', w.queue)
)
select i.id, i.run_id, false as deduped, (select count(*) from woke) as woke from inserted i
union all
select f.id, f.run_id, true as deduped, 0 as woke from found f
