-- The migrations ledger (the twin of x_backfills); created before anything else applies.
create table if not exists x_migrations (
  id         text        primary key,
  checksum   text        not null,
  applied_at timestamptz not null default now()
)
