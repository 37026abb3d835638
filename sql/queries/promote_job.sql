-- promote_job: a job waiting on its run_at (delayed, or ready and backing off) is due now.
-- prior_state and whether it moved tell the driver which error a refusal is.
-- $1 id  $2 now ms
with target as (select j.id, j.state from x_jobs j where j.id = $1::text),
moved as (
  update x_jobs j
     set run_at = x_ts($2::bigint), state = 'ready', updated_at = x_ts($2::bigint)
   where j.id = $1::text
     and j.state in ('delayed', 'ready')
     and j.run_at > x_ts($2::bigint)
  returning j.*
),
woke as (select pg_notify('x_jobs_wake', m.queue) from moved m)
select (select t.state from target t) as prior_state,
       (select count(*) from woke) as woke,
       m.id, m.run_id, m.name, m.queue, m.state, m.input::text as input, m.tenant_id,
       m.idempotency_key, m.attempt, m.max_attempts, x_ms(m.run_at) as run_at_ms,
       x_ms(m.created_at) as created_at_ms, x_ms(m.updated_at) as updated_at_ms,
       x_ms(m.finished_at) as finished_at_ms, m.claimed_by, m.claim,
       x_ms(m.lease_expires_at) as lease_expires_at_ms, m.last_error,
       m.progress::text as progress, m.traceparent, m.enqueued_by, m.priority
  from (select 1) one left join moved m on true
