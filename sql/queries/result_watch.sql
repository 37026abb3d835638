-- result_watch: a result wait marks the row (result_waited), so the statement that finishes
-- it (ack, a dead or failed nack, cancel) announces its id on `x_jobs_settled`, and reads the
-- row in the same statement. Only a live row is marked; a finished one is read as it is. The
-- mark and a settle take the row's lock in turn: whichever lands second sees the other (the
-- settle sees the mark and notifies, or the mark sees the finished state), so no settle slips
-- between the read and the wait.
-- $1 id
with marked as (
  update x_jobs j
     set result_waited = true
   where j.id = $1::text
     and j.state in ('ready', 'delayed', 'running', 'suspended')
     and j.result_waited is not true
  returning j.id
)
select j.id, j.run_id, j.name, j.queue, j.state, j.input::text as input, j.tenant_id,
       j.idempotency_key, j.attempt, j.max_attempts, x_ms(j.run_at) as run_at_ms,
       x_ms(j.created_at) as created_at_ms, x_ms(j.updated_at) as updated_at_ms,
       x_ms(j.finished_at) as finished_at_ms, j.claimed_by, j.claim,
       x_ms(j.lease_expires_at) as lease_expires_at_ms, j.last_error,
       j.progress::text as progress, j.traceparent, j.enqueued_by, j.priority, j.result::text as result,
       (select count(*) from marked) as marked
  from x_jobs j
 where j.id = $1::text
