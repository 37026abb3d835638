-- webhooks_endpoint_sealed: every endpoint's sealed secrets and headers (or its headers still
-- in clear, from before 0019), for `ujobs webhooks reseal`.
select id, secret_sealed, previous_secret_sealed, headers::text as headers, headers_sealed
  from x_webhook_endpoints
 order by id
