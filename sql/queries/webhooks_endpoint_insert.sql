-- webhooks_endpoint_insert: register an endpoint; answers no row when the id is taken.
-- $1 id  $2 tenant (null: no tenant)  $3 url  $4 scheme  $5 sealed secret
-- $6 header names (json, each name -> '')  $7 description  $8 now ms
-- $9 POSTs a second at most (null: no pace)  $10 sealed header values (null: no headers)
-- $11 payload ('envelope' or 'raw')
insert into x_webhook_endpoints
  (id, tenant_id, url, scheme, secret_sealed, headers, description, created_at, updated_at,
   rate_per_s, headers_sealed, payload)
values ($1::text, $2::text, $3::text, $4::text, $5::text, $6::text::jsonb, $7::text,
        x_ts($8::bigint), x_ts($8::bigint), $9::double precision, $10::text, $11::text)
on conflict (id) do nothing
returning id
