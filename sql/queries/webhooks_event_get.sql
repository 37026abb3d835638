-- webhooks_event_get: the event a delivery sends.
-- $1 id
select id, tenant_id, topic, body from x_webhook_events where id = $1::text
