-- webhooks_endpoint_seal_headers: store an endpoint's header values sealed (under the current
-- key) and its names alone in `headers`, unless the row's headers changed since they were read.
-- $1 id  $2 headers as read (json)  $3 sealed as read (or null)  $4 names (json)  $5 sealed now
update x_webhook_endpoints
   set headers = $4::text::jsonb, headers_sealed = $5::text
 where id = $1::text and headers = $2::text::jsonb
   and headers_sealed is not distinct from $3::text
returning id
