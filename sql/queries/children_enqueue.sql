-- children_enqueue: one child of a running parent (`run.step.enqueue`), one statement:
-- enqueue.sql with the child's parent (`parent_id`, migration 0027) and whether a cancel of
-- the parent leaves it alive (`parent_detached`). The child's id is derived from the parent's
-- run and the step's name by the caller, so a replay after a crash between this insert and
-- the step's save meets the row it made: nothing is inserted and that row is answered
-- (deduped), finished or not. A live row holding the child's (name, tenant, key) answers too.
-- The parent must exist: a missing one inserts nothing and answers one row with a null id (the
-- caller says X_JOB_NOT_FOUND); no row at all is a concurrent enqueue of the same id or key
-- that committed after this statement's snapshot (sent again, as enqueue.sql is). The wake is enqueue.sql's: at most once per queue per 250 ms slot ($13).
-- $1 id  $2 run_id  $3 name  $4 queue  $5 input (json text)  $6 tenant_id  $7 idempotency_key
-- $8 max_attempts  $9 run_at ms  $10 now ms  $11 traceparent  $12 enqueued_by  $13 wake slot
-- A child is born waited for (parent_waits) and counted on its parent (children_waited) in
-- this same statement: almost every child is gathered, and a wait then marks nothing (its
-- mark finds every child counted already). A child nobody waits for costs its parent at most
-- a spurious wake (a sleep parks again, an event wait looks again).
-- $14 parent id  $15 detached (bool)  $16 priority
with parent as (
  select p.id from x_jobs p where p.id = $14::text
),
inserted as (
  insert into x_jobs (id, run_id, name, queue, state, input, tenant_id, idempotency_key,
                      max_attempts, run_at, created_at, updated_at, traceparent, enqueued_by,
                      parent_id, parent_detached, parent_waits, priority)
  select $1::text, $2::text, $3::text, $4::text,
         case when $9::bigint > $10::bigint then 'delayed' else 'ready' end,
         $5::text::jsonb, $6::text, $7::text, $8::int,
         x_ts($9::bigint), x_ts($10::bigint), x_ts($10::bigint), $11::text, $12::text,
         p.id, case when $15::bool then true end, true, $16::smallint
    from parent p
  on conflict do nothing
  returning id, run_id, queue
),
counted as (
  update x_jobs p
     set children_waited = coalesce(p.children_waited, 0) + (select count(*) from inserted)
   where p.id = $14::text
     and exists (select 1 from inserted)
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
     and exists (select 1 from parent)
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
union all
select null, null, false, 0 where not exists (select 1 from parent)
