-- webhooks_endpoint_get: one endpoint as the deliverer signs with it; the previous secret only
-- while its rotation window is open.
-- $1 id  $2 now ms
select e.id, e.tenant_id, e.url, e.scheme, e.secret_sealed,
       case when e.previous_expires_at > x_ts($2::bigint) then e.previous_secret_sealed end
         as previous_secret_sealed,
       e.headers::text as headers, e.headers_sealed, e.disabled_at is not null as disabled, e.rate_per_s,
       e.payload
  from x_webhook_endpoints e
 where e.id = $1::text
