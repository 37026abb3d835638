-- webhooks_deliveries_list: an endpoint's attempts, newest first; $2 keeps only the ones that
-- did not deliver.
-- $1 endpoint id  $2 failed only  $3 limit
select endpoint_id, event_id, job_id, attempt, outcome, status, code, latency_ms,
       response_excerpt, x_ms(at) as at_ms
  from x_webhook_deliveries
 where endpoint_id = $1::text and (not $2::boolean or outcome <> 'delivered')
 order by at desc, seq desc
 limit $3::int
