-- webhooks_event_store: store an event's exact bytes once, and answer the endpoints of its
-- tenant subscribed to its topic (or to '*'), disabled ones included (their deliveries are
-- kept, skipped, for a redeliver after re-enable): one round trip and one commit for both. A
-- second store of the same id keeps the first (and fans out again, which the deliveries'
-- idempotency keys dedupe). The insert runs whether or not the select reads it.
-- $1 id  $2 tenant or null  $3 topic  $4 body  $5 now ms
with stored as (
  insert into x_webhook_events (id, tenant_id, topic, body, created_at)
  values ($1::text, $2::text, $3::text, $4::bytea, x_ts($5::bigint))
  on conflict (id) do nothing
)
select distinct e.id, e.tenant_id
  from x_webhook_subscriptions s
  join x_webhook_endpoints e on e.id = s.endpoint_id
 where s.topic in ($3::text, '*')
   and e.tenant_id is not distinct from $2::text
 order by e.id
