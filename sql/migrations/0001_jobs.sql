-- 0001_jobs: every table of the queue, in one file (DESIGN.md §3). Never edit once applied;
-- a change is a new numbered file. Why the tables look like this: sql/README.md.

-- Epoch milliseconds <-> timestamptz. The Python side speaks epoch ms; the columns are
-- timestamptz so an operator (and the scaler's depth statement) can compare with now().
-- Both are one-expression SQL functions no more volatile than their bodies, so the planner
-- inlines them (to_timestamp(float8) is immutable; extract() on a timestamptz is stable).
create function x_ts(ms bigint) returns timestamptz
  language sql immutable parallel safe strict
  as $$ select to_timestamp(ms / 1000.0) $$;

create function x_ms(ts timestamptz) returns bigint
  language sql stable parallel safe strict
  as $$ select (extract(epoch from ts) * 1000)::bigint $$;

-- The queue. One row per job; settled rows stay (introspection, requeue, outbox dedupe by id)
-- until a retention sweep deletes them, but no hot-path index holds them.
create table x_jobs (
  id               text        primary key,
  seq              bigint      generated always as identity,
  run_id           text        not null,
  name             text        not null,
  queue            text        not null default 'default',
  state            text        not null,
  input            jsonb       not null,
  tenant_id        text,
  idempotency_key  text        not null,
  attempt          integer     not null default 0,
  max_attempts     integer     not null,
  claim            integer     not null default 0,
  claimed_by       text,
  lease_expires_at timestamptz,
  run_at           timestamptz not null,
  created_at       timestamptz not null,
  updated_at       timestamptz not null,
  finished_at      timestamptz,
  last_error       text,
  progress         jsonb,
  traceparent      text,
  enqueued_by      text,
  constraint x_jobs_state_check check (state in
    ('ready', 'delayed', 'running', 'suspended', 'done', 'failed', 'dead', 'cancelled')),
  constraint x_jobs_max_attempts_check check (max_attempts >= 1)
) with (
  fillfactor = 70,
  autovacuum_vacuum_scale_factor = 0.01,
  autovacuum_vacuum_threshold = 1000,
  autovacuum_analyze_scale_factor = 0.02,
  autovacuum_vacuum_cost_delay = 1
);

-- One live run per (name, tenant, key): the enqueue's dedupe and the requeue's X_JOB_DUPLICATE.
create unique index x_jobs_name_tenant_idempotency_live_idx
  on x_jobs (name, coalesce(tenant_id, ''), idempotency_key)
  where state in ('ready', 'delayed', 'running', 'suspended');

-- What the claim scans: only claimable rows, in the order they are handed out.
create index x_jobs_claim_idx on x_jobs (queue, run_at, seq)
  where state in ('ready', 'delayed', 'suspended');

-- What the claim's lapsed-lease arm and the scaler scan: only running rows. lease_expires_at
-- is deliberately NOT indexed, so a heartbeat is a HOT update.
create index x_jobs_running_idx on x_jobs (queue) where state = 'running';

-- The operator's newest-first pages (and their cursors).
create index x_jobs_created_idx on x_jobs (created_at, id);

-- Steps are keyed by run; remove/purge ask "does another row still share this run?".
create index x_jobs_run_id_idx on x_jobs (run_id);

-- What retention sweeps read: finished rows by state and age.
create index x_jobs_finished_idx on x_jobs (state, finished_at)
  where state in ('done', 'failed', 'dead', 'cancelled');

-- Completed steps: their output replays instead of running again.
create table x_job_steps (
  run_id      text        not null,
  name        text        not null,
  seq         bigint      generated always as identity,
  output      jsonb,
  started_at  timestamptz not null,
  finished_at timestamptz not null,
  primary key (run_id, name)
);

-- The stored event bus (step.wait_for_event). Stamped by the DATABASE clock.
create table x_job_events (
  id           text        primary key,
  name         text        not null,
  payload      jsonb       not null,
  published_at timestamptz not null,
  expires_at   timestamptz not null
);
create index x_job_events_name_idx on x_job_events (name, published_at, id);
create index x_job_events_expires_idx on x_job_events (expires_at);

-- Fleet leases: at most `limit` live holders per key, one row per held slot.
-- Keys: `job:<name>`, `job-key:<name>:<key>`, and the scheduler leader's own key.
create table x_job_leases (
  key         text        not null,
  slot        integer     not null,
  holder      text        not null,
  acquired_at timestamptz not null,
  expires_at  timestamptz not null,
  primary key (key, slot)
);
create index x_job_leases_holder_idx on x_job_leases (key, holder);

-- The worker registry: one row per live worker process, expiring after its TTL.
create table x_job_workers (
  id                text        primary key,
  host              text        not null,
  pid               integer     not null,
  started_at        timestamptz not null,
  queues            text[]      not null,
  slots             integer     not null,
  in_flight         text[]      not null default '{}',
  last_heartbeat_at timestamptz not null,
  expires_at        timestamptz not null,
  draining_at       timestamptz
);

-- A pause is a row the claim reads, never a column on every queued row.
create table x_job_pauses (
  kind      text        not null,
  name      text        not null,
  paused_at timestamptz not null,
  primary key (kind, name),
  constraint x_job_pauses_kind_check check (kind in ('queue', 'task'))
);

-- Per-job history, moved by the statement that settles the row. bucket_start_ms is epoch ms.
create table x_job_counters (
  job             text    not null,
  width_ms        integer not null,
  bucket_start_ms bigint  not null,
  done            bigint  not null default 0,
  retried         bigint  not null default 0,
  failed          bigint  not null default 0,
  dead            bigint  not null default 0,
  duration_ms     bigint  not null default 0,
  primary key (job, width_ms, bucket_start_ms)
) with (fillfactor = 50);

-- The enqueue's wake throttle: the last 250 ms slot a queue was announced in.
create table x_job_wake_slots (
  queue text   primary key,
  slot  bigint not null
) with (fillfactor = 50);

-- The transactional outbox: a staged enqueue, published by the relay after COMMIT.
-- id IS the job id and run_id the run's id, both minted at staging.
create table x_outbox (
  id              text        primary key,
  run_id          text        not null,
  name            text        not null,
  queue           text        not null,
  input           jsonb       not null,
  tenant_id       text,
  idempotency_key text        not null,
  max_attempts    integer     not null,
  run_at          timestamptz,
  traceparent     text,
  enqueued_by     text,
  staged_at       timestamptz not null,
  claimed_at      timestamptz,
  claimed_by      text,
  published_at    timestamptz
) with (fillfactor = 70);
create index x_outbox_unpublished_idx on x_outbox (staged_at, id) where published_at is null;
create index x_outbox_published_idx on x_outbox (published_at) where published_at is not null;

-- The backfill ledger: one row per pass.
create table x_backfills (
  name           text        not null,
  run_id         text        not null,
  checksum       text        not null,
  status         text        not null,
  app_version    text,
  rows_processed bigint      not null default 0,
  last_cursor    jsonb,
  started_at     timestamptz not null,
  completed_at   timestamptz,
  error          text,
  primary key (name, run_id),
  constraint x_backfills_status_check check (status in ('running', 'completed', 'failed'))
);
create index x_backfills_started_idx on x_backfills (started_at desc, name, run_id);

-- The scheduler: each task's watermark (the last occurrence it has dealt with) ...
create table x_scheduler_state (
  task         text        primary key,
  watermark_ms bigint      not null,
  updated_at   timestamptz
);

-- ... and the last occurrence of each task that actually DISPATCHED.
create table x_task_fires (
  task          text   primary key,
  occurrence_ms bigint not null,
  fired_at_ms   bigint not null
);
