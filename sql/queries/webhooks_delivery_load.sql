-- webhooks_delivery_load: what one delivery attempt reads, in one round trip: the endpoint
-- (its verdict column included; the previous secret only while its rotation window is open)
-- and the event, or null event columns when the event is unknown. No row: unknown endpoint.
-- $1 endpoint id  $2 event id  $3 now ms
select e.id, e.tenant_id, e.url, e.scheme, e.secret_sealed,
       case when e.previous_expires_at > x_ts($3::bigint) then e.previous_secret_sealed end
         as previous_secret_sealed,
       e.headers::text as headers, e.disabled_at is not null as disabled, e.rate_per_s,
       v.id as event_id, v.tenant_id as event_tenant_id, v.topic as event_topic,
       v.body as event_body
  from x_webhook_endpoints e
  left join x_webhook_events v on v.id = $2::text
 where e.id = $1::text
