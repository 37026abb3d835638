-- webhooks_deliveries_newest: each endpoint's newest attempt (the dashboard's webhooks page), in
-- one statement: one probe of x_webhook_deliveries_endpoint_idx per endpoint instead of one
-- query each. An endpoint never attempted has no row.
-- $1 endpoint ids
select d.endpoint_id, d.event_id, d.job_id, d.attempt, d.outcome, d.status, d.code,
       d.latency_ms, d.response_excerpt, d.at_ms
  from unnest($1::text[]) as e(id)
 cross join lateral (
   select endpoint_id, event_id, job_id, attempt, outcome, status, code, latency_ms,
          response_excerpt, x_ms(at) as at_ms
     from x_webhook_deliveries
    where endpoint_id = e.id
    order by at desc, seq desc
    limit 1
 ) d
