-- webhooks_endpoint_headers_clear: the endpoints whose header values are still in clear
-- (written before 0019_webhook_headers_sealed), for the deliverer to seal when it starts.
select id, headers::text as headers, headers_sealed
  from x_webhook_endpoints
 where headers_sealed is null and headers <> '{}'::jsonb
 order by id
