-- webhooks_endpoint_sealed: every endpoint's sealed secrets, for `ujobs webhooks reseal`.
select id, secret_sealed, previous_secret_sealed
  from x_webhook_endpoints
 order by id
