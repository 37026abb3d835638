-- webhooks_endpoint_disable: stop deliveries to an endpoint (an operator, disable_after, or a
-- 410). The first verdict's time and reason stay. Answers no row for an unknown id.
-- $1 id  $2 reason  $3 now ms
update x_webhook_endpoints
   set disabled_at = coalesce(disabled_at, x_ts($3::bigint)),
       disabled_reason = coalesce(disabled_reason, $2::text),
       updated_at = x_ts($3::bigint)
 where id = $1::text
returning id
