-- get_job: one job as the operator surface shows it.
-- The parent (migration 0027) rides along: the job page links it.
-- $1 id
select j.id, j.run_id, j.name, j.queue, j.state, j.input::text as input, j.tenant_id,
       j.idempotency_key, j.attempt, j.max_attempts, x_ms(j.run_at) as run_at_ms,
       x_ms(j.created_at) as created_at_ms, x_ms(j.updated_at) as updated_at_ms,
       x_ms(j.finished_at) as finished_at_ms, j.claimed_by, j.claim,
       x_ms(j.lease_expires_at) as lease_expires_at_ms, j.last_error,
       j.progress::text as progress, j.traceparent, j.enqueued_by, j.priority, j.result::text as result,
       j.parent_id
  from x_jobs j
 where j.id = $1::text
