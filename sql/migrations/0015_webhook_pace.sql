-- 0015_webhook_pace: one row per rate-limited webhook endpoint, the instant its next POST may
-- leave, shared by every deliverer (an endpoint's rate_per_s is fleet-wide, not per process).
-- webhooks_pace_reserve moves it forward 1/rate at a time under the row's lock, so two
-- deliverers reserving at once take two slots one gap apart.
create table x_webhook_pace (
  endpoint_id text collate "C" primary key references x_webhook_endpoints (id) on delete cascade,
  next_at     timestamptz not null
);
