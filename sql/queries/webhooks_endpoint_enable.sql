-- webhooks_endpoint_enable: the operator's re-enable; the consecutive-failure count restarts.
-- $1 id  $2 now ms
update x_webhook_endpoints
   set disabled_at = null, disabled_reason = null, consecutive_failures = 0,
       updated_at = x_ts($2::bigint)
 where id = $1::text
returning id
