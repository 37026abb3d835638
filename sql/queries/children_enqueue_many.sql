-- children_enqueue_many: many children of one parent in one statement
-- (`run.step.enqueue_many`): children_enqueue.sql for a batch. Each row's id is derived from
-- the parent's run, the step's name and its index, and its key is its id, so a replay meets
-- the rows the first attempt made: they insert nothing and are answered as existing. Answers
-- whether the parent exists and the ids inserted; the queues of the rows inserted are
-- announced on x_jobs_wake (a fan-out is rare enough to skip enqueue.sql's 250 ms slot).
-- Each child is born waited for and counted on its parent, as in children_enqueue.sql.
-- $1 parent id  $2 detached (bool)  $3 now ms  $4 ids  $5 run ids  $6 names  $7 queues
-- $8 inputs (json text)  $9 tenants  $10 idempotency keys  $11 max attempts  $12 run_at ms
-- $13 traceparents  $14 enqueued_by  $15 priorities
with parent as (
  select p.id from x_jobs p where p.id = $1::text
),
inserted as (
  insert into x_jobs (id, run_id, name, queue, state, input, tenant_id, idempotency_key,
                      max_attempts, run_at, created_at, updated_at, traceparent, enqueued_by,
                      parent_id, parent_detached, parent_waits, priority)
  select r.id, r.run_id, r.name, r.queue,
         case when r.run_at > $3::bigint then 'delayed' else 'ready' end,
         r.input::jsonb, r.tenant_id, r.idempotency_key, r.max_attempts,
         x_ts(r.run_at), x_ts($3::bigint), x_ts($3::bigint), r.traceparent, r.enqueued_by,
         p.id, case when $2::bool then true end, true, r.priority
    from unnest($4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[],
                $10::text[], $11::int[], $12::bigint[], $13::text[], $14::text[],
                $15::smallint[])
         as r(id, run_id, name, queue, input, tenant_id, idempotency_key, max_attempts, run_at,
              traceparent, enqueued_by, priority)
   cross join parent p
  on conflict do nothing
  returning id, queue
),
counted as (
  update x_jobs p
     set children_waited = coalesce(p.children_waited, 0) + (select count(*) from inserted)
   where p.id = $1::text
     and exists (select 1 from inserted)
),
woke as (
  select pg_notify('x_jobs_wake', q.queue) from (select distinct queue from inserted) q
)
select (select count(*) from parent) > 0 as parent,
       array(select i.id from inserted i) as inserted,
       (select count(*) from woke) as woke
