-- cancel_job: stop a LIVE job (ready, delayed, running, suspended). A running one stops at its
-- next heartbeat ('cancelled'); its own ack/nack then matches nothing (fenced on 'running').
-- A finished row is left exactly as it ended: no row comes back.
-- last_error says why it ended, in every driver's words: 'cancelled: <reason>', or 'cancelled'
-- with no (or an empty) reason, over any error an earlier attempt left.
-- $1 id  $2 reason  $3 now ms
update x_jobs j
   set state = 'cancelled',
       finished_at = x_ts($3::bigint),
       updated_at = x_ts($3::bigint),
       lease_expires_at = null,
       last_error = coalesce('cancelled: ' || nullif($2::text, ''), 'cancelled')
 where j.id = $1::text
   and j.state in ('ready', 'delayed', 'running', 'suspended')
returning j.id, j.run_id, j.name, j.queue, j.state, j.input::text as input, j.tenant_id,
       j.idempotency_key, j.attempt, j.max_attempts, x_ms(j.run_at) as run_at_ms,
       x_ms(j.created_at) as created_at_ms, x_ms(j.updated_at) as updated_at_ms,
       x_ms(j.finished_at) as finished_at_ms, j.claimed_by, j.claim,
       x_ms(j.lease_expires_at) as lease_expires_at_ms, j.last_error,
       j.progress::text as progress, j.traceparent, j.enqueued_by
