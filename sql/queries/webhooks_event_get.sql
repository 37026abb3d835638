-- webhooks_event_get: the event a delivery sends.
-- $1 id
select id, tenant_id, topic, body, x_ms(created_at) as created_at_ms
  from x_webhook_events where id = $1::text
