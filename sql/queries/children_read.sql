-- children_read: the rows among $2 that are children of $1, as get_job.sql reads a row (their
-- results included): what a parent's wait decides on. An id that is not this parent's child
-- comes back as no row, so another tenant's job answers exactly as a missing one.
-- $1 parent id  $2 child ids
select j.id, j.run_id, j.name, j.queue, j.state, j.input::text as input, j.tenant_id,
       j.idempotency_key, j.attempt, j.max_attempts, x_ms(j.run_at) as run_at_ms,
       x_ms(j.created_at) as created_at_ms, x_ms(j.updated_at) as updated_at_ms,
       x_ms(j.finished_at) as finished_at_ms, j.claimed_by, j.claim,
       x_ms(j.lease_expires_at) as lease_expires_at_ms, j.last_error,
       j.progress::text as progress, j.traceparent, j.enqueued_by, j.priority, j.result::text as result,
       j.parent_id
  from x_jobs j
 where j.id = any($2::text[])
   and j.parent_id = $1::text
