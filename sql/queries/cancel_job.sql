-- cancel_job: stop a LIVE job (ready, delayed, running, suspended). A running one stops at its
-- next heartbeat ('cancelled'); its own ack/nack then matches nothing (fenced on 'running').
-- A finished row is left exactly as it ended: no row comes back.
-- last_error says why it ended, in every driver's words: 'cancelled: <reason>', or 'cancelled'
-- with no (or an empty) reason, over any error an earlier attempt left.
-- With $4 (the driver's settlements on) the cancel also writes its x_settlements row
-- (outcome 'cancelled', code null, the row's attempt) in this same statement, so the NATS edge
-- is told of a run an operator ended as it is of every other ending.
-- A row a result wait marked (result_waited, migration 0023) announces its id on
-- `x_jobs_settled`.
-- Children (migration 0027): unless $5 (detach the children), the cancel of a live row also
-- cancels its live descendants that were not enqueued detached (parent_detached), through
-- x_jobs_parent_idx, with last_error 'cancelled: parent <id> cancelled' and their own
-- settlements rows and result-wait announcements; a detached child keeps running, and so do
-- its own children. The answer is the row asked for only.
-- A cancelled child its parent waits for (parent_waits) takes one off the parent's count and,
-- at zero, makes a suspended parent due now, as ack.sql's `woke` does.
-- $1 id  $2 reason  $3 now ms  $4 write the settlements outbox (bool)  $5 detach the children
with recursive tree (id) as (
  select c.id from x_jobs c
   where c.parent_id = $1::text and not $5::bool and c.parent_detached is not true
  union
  select c.id from x_jobs c join tree t on c.parent_id = t.id
   where c.parent_detached is not true
),
cancelled as (
  update x_jobs j
     set state = 'cancelled',
         finished_at = x_ts($3::bigint),
         updated_at = x_ts($3::bigint),
         lease_expires_at = null,
         last_error = coalesce('cancelled: ' || nullif($2::text, ''), 'cancelled')
   where j.id = $1::text
     and j.state in ('ready', 'delayed', 'running', 'suspended')
  returning j.*, case when j.result_waited then pg_notify('x_jobs_settled', j.id) end as told
),
woke as (
  update x_jobs p
     set children_waited = case when p.state = 'suspended' and p.children_waited <= 1
                                then null else p.children_waited - 1 end,
         run_at = case when p.state = 'suspended' and p.children_waited <= 1
                       then x_ts($3::bigint) else p.run_at end
    from cancelled c
   where p.id = c.parent_id
     and c.parent_waits
  returning case when p.state = 'suspended' and p.children_waited is null
                 then pg_notify('x_jobs_wake', p.queue) end as told
),
descendants as (
  update x_jobs j
     set state = 'cancelled',
         finished_at = x_ts($3::bigint),
         updated_at = x_ts($3::bigint),
         lease_expires_at = null,
         last_error = 'cancelled: parent ' || $1::text || ' cancelled'
   where j.id in (select t.id from tree t)
     and j.state in ('ready', 'delayed', 'running', 'suspended')
     and exists (select 1 from cancelled)
  returning j.id, j.run_id, j.name, j.tenant_id, j.attempt,
            case when j.result_waited then pg_notify('x_jobs_settled', j.id) end as told
),
outbox as (
  insert into x_settlements (job_id, run_id, name, tenant_id, outcome, code, attempt, settled_at)
  select c.id, c.run_id, c.name, c.tenant_id, 'cancelled', null, c.attempt, x_ts($3::bigint)
    from (select id, run_id, name, tenant_id, attempt from cancelled
          union all
          select id, run_id, name, tenant_id, attempt from descendants) c
   where $4::bool
)
select j.id, j.run_id, j.name, j.queue, j.state, j.input::text as input, j.tenant_id,
       j.idempotency_key, j.attempt, j.max_attempts, x_ms(j.run_at) as run_at_ms,
       x_ms(j.created_at) as created_at_ms, x_ms(j.updated_at) as updated_at_ms,
       x_ms(j.finished_at) as finished_at_ms, j.claimed_by, j.claim,
       x_ms(j.lease_expires_at) as lease_expires_at_ms, j.last_error,
       j.progress::text as progress, j.traceparent, j.enqueued_by, j.priority, j.result::text as result
  from cancelled j
