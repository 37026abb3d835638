-- webhooks_subscribers: the endpoints of the event's tenant subscribed to its topic (or to '*'),
-- disabled ones included: their deliveries are kept (skipped) for a redeliver after re-enable.
-- $1 topic  $2 tenant or null
select distinct e.id, e.tenant_id
  from x_webhook_subscriptions s
  join x_webhook_endpoints e on e.id = s.endpoint_id
 where s.topic in ($1::text, '*')
   and e.tenant_id is not distinct from $2::text
 order by e.id
