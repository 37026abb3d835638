-- requeue_job: put ONE finished job (done, failed, dead, cancelled) back on its queue, due
-- now, with a fresh attempt budget. Moves nothing when the row is live (prior_state says which)
-- or when another live row holds its (name, tenant, key) (held). $2 names a step: that step
-- and every step saved after it are dropped in this same statement, so the run replays from
-- there; only the row's own tenant's steps of that run_id are touched. Announces the queue on
-- x_jobs_wake.
-- $1 id  $2 from step (null: keep every step)  $3 now ms
with target as (
  select j.id, j.state, j.name, j.tenant_id, j.idempotency_key from x_jobs j where j.id = $1::text
),
held as (
  select o.id
    from x_jobs o join target t
      on o.name = t.name
     and coalesce(o.tenant_id, '') = coalesce(t.tenant_id, '')
     and o.idempotency_key = t.idempotency_key
   where o.state in ('ready', 'delayed', 'running', 'suspended') and o.id <> t.id
   limit 1
),
moved as (
  update x_jobs j
     set state = 'ready',
         attempt = 0,
         run_at = x_ts($3::bigint),
         finished_at = null,
         lease_expires_at = null,
         last_error = null,
         result = null,
         snoozes = 0,
         updated_at = x_ts($3::bigint)
    from target t
   where j.id = t.id
     and j.state in ('done', 'failed', 'dead', 'cancelled')
     and not exists (select 1 from held)
  returning j.*
),
cut as (
  select s.run_id, s.tenant_id, s.seq
    from x_job_steps s
    join moved m on s.run_id = m.run_id and s.tenant_id = coalesce(m.tenant_id, '')
   where s.name = $2::text
),
dropped as (
  delete from x_job_steps s using cut c
   where s.run_id = c.run_id and s.tenant_id = c.tenant_id and s.seq >= c.seq
  returning 1
),
woke as (
  select pg_notify('x_jobs_wake', m.queue) from moved m
)
select (select t.state from target t) as prior_state,
       exists (select 1 from held) as held,
       (select count(*) from woke) as woke,
       (select count(*) from dropped) as dropped_steps,
       m.id, m.run_id, m.name, m.queue, m.state, m.input::text as input, m.tenant_id,
       m.idempotency_key, m.attempt, m.max_attempts, x_ms(m.run_at) as run_at_ms,
       x_ms(m.created_at) as created_at_ms, x_ms(m.updated_at) as updated_at_ms,
       x_ms(m.finished_at) as finished_at_ms, m.claimed_by, m.claim,
       x_ms(m.lease_expires_at) as lease_expires_at_ms, m.last_error,
       m.progress::text as progress, m.traceparent, m.enqueued_by, m.priority
  from (select 1) one left join moved m on true
