-- event_publish: store one event, stamped (to the millisecond) by the DATABASE clock, and
-- matchable until published_at + $4 ms; $5 is the publisher's tenant (NULL: every tenant's
-- waiters).
-- $1 id  $2 name  $3 payload json text  $4 ttl ms  $5 tenant
insert into x_job_events (id, name, payload, published_at, expires_at, tenant_id)
select $1::text, $2::text, $3::text::jsonb, t.at, t.at + $4::bigint * interval '1 millisecond',
       $5::text
  from (select date_trunc('milliseconds', now()) as at) t
returning x_ms(published_at) as published_at_ms, x_ms(expires_at) as expires_at_ms
