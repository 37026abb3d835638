-- 0010: outbound webhooks — endpoints, their subscriptions, the events published to them and
-- the delivery ledger. The queue rows themselves are ordinary x_jobs rows on the `webhooks`
-- queue (one event, one endpoint, one job); these tables are what the deliverer reads and
-- writes around each POST.
--
-- Secrets are sealed (AES-256-GCM under UJOBS_SECRET_KEY, the endpoint id as associated
-- data) before they reach a row: `secret_sealed` and `previous_secret_sealed` hold
-- 'v1:<key id>:<base64>' and never the secret. The previous secret is kept until
-- `previous_expires_at` so both sign during a rotation.
create table x_webhook_endpoints (
  id                    text collate "C" primary key,
  tenant_id             text collate "C",
  url                   text not null,
  scheme                text not null default 'standard'
                          check (scheme in ('standard', 'ultimate')),
  secret_sealed         text not null,
  previous_secret_sealed text,
  previous_expires_at   timestamptz,
  headers               jsonb not null default '{}'::jsonb,
  description           text not null default '',
  rate_per_s            double precision check (rate_per_s > 0),
  disabled_at           timestamptz,
  disabled_reason       text,
  consecutive_failures  integer not null default 0,
  created_at            timestamptz not null,
  updated_at            timestamptz not null
);
create index x_webhook_endpoints_tenant_idx on x_webhook_endpoints (tenant_id, id);

-- Which endpoints an event of a topic fans out to; '*' subscribes to every topic.
create table x_webhook_subscriptions (
  topic       text collate "C" not null,
  endpoint_id text collate "C" not null references x_webhook_endpoints (id) on delete cascade,
  primary key (topic, endpoint_id)
);
create index x_webhook_subscriptions_endpoint_idx on x_webhook_subscriptions (endpoint_id);

-- The exact bytes every delivery of an event sends (bytea: the body is signed as stored).
create table x_webhook_events (
  id         text collate "C" primary key,
  tenant_id  text collate "C",
  topic      text collate "C" not null,
  body       bytea not null,
  created_at timestamptz not null
);

-- One row per attempt that reached for a socket (or was skipped for a disabled endpoint).
-- (job_id, attempt) is unique: an attempt is recorded once however often its write is retried,
-- so a redelivered attempt never counts twice toward disable_after.
create table x_webhook_deliveries (
  seq              bigserial primary key,
  endpoint_id      text collate "C" not null,
  event_id         text collate "C" not null,
  job_id           text collate "C" not null,
  attempt          integer not null,
  outcome          text not null check (outcome in ('delivered', 'failed', 'skipped')),
  status           integer,
  code             text,
  latency_ms       integer not null,
  response_excerpt text not null default '',
  at               timestamptz not null,
  unique (job_id, attempt)
);
create index x_webhook_deliveries_endpoint_idx on x_webhook_deliveries (endpoint_id, at, seq);
