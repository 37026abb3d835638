-- workers: every live worker (its row not expired), oldest first.
-- $1 now ms
select w.id, w.host, w.pid, x_ms(w.started_at) as started_at_ms, w.queues, w.slots,
       w.in_flight, x_ms(w.last_heartbeat_at) as last_heartbeat_ms,
       x_ms(w.expires_at) as expires_at_ms, x_ms(w.draining_at) as draining_at_ms
  from x_job_workers w
 where w.expires_at > x_ts($1::bigint)
 order by w.started_at, w.id
