-- webhooks_delivery_record: one attempt into the ledger, and the endpoint's consecutive-failure
-- count moved in the same statement (delivered resets it, failed adds one, skipped leaves it).
-- The endpoint row is written only when the count changes, so the success path of a busy
-- endpoint never rewrites its row. An attempt already recorded (same job, same attempt)
-- changes nothing. Answers the count.
-- $1 endpoint  $2 event  $3 job  $4 attempt  $5 outcome  $6 status  $7 code  $8 latency ms
-- $9 response excerpt  $10 now ms
with ins as (
  insert into x_webhook_deliveries
    (endpoint_id, event_id, job_id, attempt, outcome, status, code, latency_ms,
     response_excerpt, at)
  values ($1::text, $2::text, $3::text, $4::int, $5::text, $6::int, $7::text, $8::int, $9::text,
          x_ts($10::bigint))
  on conflict (job_id, attempt) do nothing
  returning outcome
),
moved as (
  update x_webhook_endpoints e
     set consecutive_failures = case i.outcome when 'delivered' then 0
                                               else e.consecutive_failures + 1 end
    from ins i
   where e.id = $1::text
     and (i.outcome = 'failed' or (i.outcome = 'delivered' and e.consecutive_failures <> 0))
  returning e.consecutive_failures
)
select coalesce((select consecutive_failures from moved),
                (select consecutive_failures from x_webhook_endpoints where id = $1::text),
                0) as consecutive
