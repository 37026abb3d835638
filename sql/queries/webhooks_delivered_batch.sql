-- webhooks_delivered_batch: successful attempts into the ledger, many at once (the deliverer
-- buffers them for a few milliseconds: a success throws nothing, so nothing waits on its row),
-- and the consecutive-failure count of each endpoint among them back to 0 where it was not.
-- Attempts already recorded change nothing.
-- $1 endpoints  $2 events  $3 jobs  $4 attempts  $5 statuses  $6 latencies ms  $7 excerpts
-- $8 at ms
with ins as (
  insert into x_webhook_deliveries
    (endpoint_id, event_id, job_id, attempt, outcome, status, code, latency_ms,
     response_excerpt, at)
  select u.endpoint_id, u.event_id, u.job_id, u.attempt, 'delivered', u.status, null,
         u.latency_ms, u.excerpt, x_ts(u.at_ms)
    from unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::int[], $6::int[],
                $7::text[], $8::bigint[])
           as u(endpoint_id, event_id, job_id, attempt, status, latency_ms, excerpt, at_ms)
  on conflict (job_id, attempt) do nothing
  returning endpoint_id
)
update x_webhook_endpoints e
   set consecutive_failures = 0
 where e.id in (select endpoint_id from ins) and e.consecutive_failures <> 0
