-- 0002: what a retention sweep of finished jobs asks of the backfill ledger: "does a RUNNING
-- pass still name this run?" The ledger's key is (name, run_id), so a lookup by run_id alone
-- needs its own index; only running passes are ever asked about.
create index x_backfills_running_idx on x_backfills (run_id) where status = 'running';
