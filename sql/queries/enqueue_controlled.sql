-- enqueue_controlled: one job enqueued with debounce and/or unique_for, one statement: the
-- insert, the debounce of a run that has not started and the unique_for lookup of a recent done
-- run happen together, so two concurrent enqueues of one key make one run.
-- - unique_for ($15): when no live run holds the key, the newest done run of the key enqueued
--   with unique_for (x_jobs_unique_done_idx) that finished after now - $15 holds it: nothing is inserted
--   and that run is answered, deduped.
--   A holder acked after this statement's snapshot is seen neither live (the insert's ON
--   CONFLICT no longer meets it) nor done (the snapshot): the row is inserted, and the driver's
--   next statement in the same transaction (unique_for_holder.sql, a fresh snapshot) finds
--   that holder and rolls the insert back.
-- - Otherwise the row is inserted as enqueue.sql inserts it (ON CONFLICT DO NOTHING over the
--   primary key and the live-key index), with unique_for_ms = $15.
-- - debounce ($14): when the live key was held, the holder is moved instead of answered, if it
--   is still waiting to start: ready or delayed and never claimed (claim = 0). It takes run_at
--   $9 (the driver put now + debounce in it) and input $5, and is answered debounced. The UPDATE
--   re-reads the row it locks (read committed): a holder a worker claimed after this
--   statement's snapshot is no longer moved, and is answered deduped by the found arm.
-- - $18 the debounce's seq (EnqueueRequest.debounce_seq; null: none): the holder is moved only
--   when its debounce_seq is null or below $18, and takes $18; otherwise it is answered
--   deduped by the found arm (a stream message delivered again after a newer one of its key).
--   An inserted row stores it.
-- - $16 a token id: the insert and the move happen only while that api token is live (as
--   enqueue_insert_live.sql); null: no check.
-- Answers one row always: live, and the ids with deduped/debounced; null ids (live) when a
-- concurrent enqueue of the id or key committed after this statement's snapshot: the driver
-- sends it again. The wake: as enqueue.sql, for an inserted or moved row ($13).
-- $1..$12 as enqueue.sql  $13 wake slot  $14 debounce ms  $15 unique_for ms  $16 token id
-- $17 priority (a debounce moves the waiting run and leaves its priority)  $18 debounce seq
with live as (
  select $16::text is null or exists (
    select 1 from x_api_tokens t
     where t.id = $16::text
       and t.revoked_at is null
       and (t.expires_at is null or t.expires_at > x_ts($10::bigint))
  ) as ok
),
recent as (
  select j.id, j.run_id
    from x_jobs j
   where $15::bigint is not null
     and j.name = $3::text
     and coalesce(j.tenant_id, '') = coalesce($6::text, '')
     and j.idempotency_key = $7::text
     and j.state = 'done'
     and j.unique_for_ms is not null
     and j.finished_at > x_ts($10::bigint - $15::bigint)
     and not exists (select 1 from x_jobs l
                      where l.name = $3::text
                        and coalesce(l.tenant_id, '') = coalesce($6::text, '')
                        and l.idempotency_key = $7::text
                        and l.state in ('ready', 'delayed', 'running', 'suspended'))
   order by j.finished_at desc
   limit 1
),
inserted as (
  insert into x_jobs (id, run_id, name, queue, state, input, tenant_id, idempotency_key,
                      max_attempts, run_at, created_at, updated_at, traceparent, enqueued_by,
                      unique_for_ms, priority, debounce_seq)
  select $1::text, $2::text, $3::text, $4::text,
         case when $9::bigint > $10::bigint then 'delayed' else 'ready' end,
         $5::text::jsonb, $6::text, $7::text, $8::int,
         x_ts($9::bigint), x_ts($10::bigint), x_ts($10::bigint), $11::text, $12::text,
         $15::bigint, $17::smallint, $18::bigint
    from live
   where live.ok
     and not exists (select 1 from recent)
     and not exists (select 1 from x_jobs j where j.id = $1::text)
  on conflict do nothing
  returning id, run_id, queue
),
moved as (
  update x_jobs j
     set run_at = x_ts($9::bigint),
         state = case when $9::bigint > $10::bigint then 'delayed' else 'ready' end,
         input = $5::text::jsonb,
         updated_at = x_ts($10::bigint),
         debounce_seq = coalesce($18::bigint, j.debounce_seq)
   where $14::bigint is not null
     and (select l.ok from live l)
     and not exists (select 1 from recent)
     and not exists (select 1 from inserted)
     and not exists (select 1 from x_jobs o where o.id = $1::text)
     and j.name = $3::text
     and coalesce(j.tenant_id, '') = coalesce($6::text, '')
     and j.idempotency_key = $7::text
     and j.state in ('ready', 'delayed')
     and j.claim = 0
     and ($18::bigint is null or j.debounce_seq is null or j.debounce_seq < $18::bigint)
  returning j.id, j.run_id, j.queue
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
      union all
      (select r.id, r.run_id from recent r)
      limit 1) h
   where (select l.ok from live l)
     and not exists (select 1 from inserted)
     and not exists (select 1 from moved)
),
woke as (
  insert into x_job_wake_slots as w (queue, slot)
  select c.queue, $13::bigint
    from (select i.queue from inserted i union select m.queue from moved m) c
   where $13::bigint is not null
     and not exists (select 1 from x_job_wake_slots s where s.queue = c.queue and s.slot >= $13::bigint)
  on conflict (queue) do update set slot = excluded.slot where w.slot < excluded.slot
  returning pg_notify('x_jobs_wake', w.queue)
),
answer as (
  select i.id, i.run_id, false as deduped, false as debounced from inserted i
  union all
  select m.id, m.run_id, true, true from moved m
  union all
  select f.id, f.run_id, true, false from found f
)
select l.ok as live, a.id, a.run_id, coalesce(a.deduped, false) as deduped,
       coalesce(a.debounced, false) as debounced, (select count(*) from woke) as woke
  from live l
  left join answer a on true
