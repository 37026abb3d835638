-- webhooks_delivery_load: what delivery attempts read, many attempts in one round trip: per
-- (endpoint, event) pair asked, the endpoint (its verdict column included; the previous secret
-- only while its rotation window is open) and the event, or null event columns when the event
-- is unknown. No row for a pair: unknown endpoint. Each pair looks its rows up by primary key:
-- the lateral subqueries' `offset 0` keeps them per-pair probes, which every plan makes index
-- scans; flattened into joins, a generic plan made on empty tables (a deliverer started on a
-- fresh install) hash-joins both tables through sequential scans, and a server without
-- autovacuum keeps that plan while x_webhook_events grows (tests/webhooks/test_load_plan.py).
-- $1 endpoint ids  $2 event ids (pairwise)  $3 now ms
select r.endpoint_id as asked_endpoint_id, r.event_id as asked_event_id,
       e.id, e.tenant_id, e.url, e.scheme, e.secret_sealed,
       case when e.previous_expires_at > x_ts($3::bigint) then e.previous_secret_sealed end
         as previous_secret_sealed,
       e.headers::text as headers, e.headers_sealed, e.disabled_at is not null as disabled, e.rate_per_s,
       e.payload, v.id as event_id, v.tenant_id as event_tenant_id, v.topic as event_topic,
       v.body as event_body, x_ms(v.created_at) as event_created_at_ms
  from unnest($1::text[], $2::text[]) as r(endpoint_id, event_id)
 cross join lateral (
   select * from x_webhook_endpoints x where x.id = r.endpoint_id offset 0
 ) e
  left join lateral (
   select * from x_webhook_events y where y.id = r.event_id offset 0
 ) v on true
