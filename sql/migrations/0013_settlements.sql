-- 0013_settlements: the settlements outbox of the NATS edge (DESIGN.md § Streams). With the
-- Postgres driver's settlements on, every settle that ends an attempt (completed, retried,
-- failed, dead) inserts one row here in the settle's own statement, so a settlement exists
-- exactly when the job's row moved. The relay publishes pending rows to UJOBS_SETTLED in seq
-- order (Nats-Msg-Id = job id:attempt:outcome) and stamps published_at; NATS away for minutes
-- leaves rows pending here, never lost. Published rows are purged after a bound
-- (settlements_purge).
create table x_settlements (
  seq          bigint      generated always as identity primary key,
  job_id       text        not null,
  run_id       text        not null,
  name         text        not null,
  tenant_id    text,
  outcome      text        not null,
  code         text,
  attempt      int         not null,
  settled_at   timestamptz not null,
  published_at timestamptz
);

create index x_settlements_pending_idx on x_settlements (seq) where published_at is null;
create index x_settlements_published_idx on x_settlements (published_at)
  where published_at is not null;
