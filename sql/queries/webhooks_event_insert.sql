-- webhooks_event_insert: store an event's exact bytes once; a second publish of the same id
-- keeps the first (and fans out again, which the deliveries' idempotency keys dedupe).
-- $1 id  $2 tenant or null  $3 topic  $4 body  $5 now ms
insert into x_webhook_events (id, tenant_id, topic, body, created_at)
values ($1::text, $2::text, $3::text, $4::bytea, x_ts($5::bigint))
on conflict (id) do nothing
