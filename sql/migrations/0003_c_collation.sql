-- 0003: identifiers compare byte by byte. Ids, names, queues and keys are identifiers, never
-- prose: under the database's default collation every index descent over them calls the
-- locale's strcoll(), and their order (the operator's pages tie-break on id) would depend on
-- the server's locale. COLLATE "C" takes Postgres' memcmp fast path and orders them by code
-- point, as the memory driver does. The tables are rewritten once, here.
alter table x_jobs
  alter column id type text collate "C",
  alter column run_id type text collate "C",
  alter column name type text collate "C",
  alter column queue type text collate "C",
  alter column state type text collate "C",
  alter column tenant_id type text collate "C",
  alter column idempotency_key type text collate "C",
  alter column claimed_by type text collate "C";

alter table x_job_steps
  alter column run_id type text collate "C",
  alter column name type text collate "C";

alter table x_job_events
  alter column id type text collate "C",
  alter column name type text collate "C";

alter table x_job_leases
  alter column key type text collate "C",
  alter column holder type text collate "C";

alter table x_job_workers alter column id type text collate "C";

alter table x_job_pauses
  alter column kind type text collate "C",
  alter column name type text collate "C";

alter table x_job_counters alter column job type text collate "C";

alter table x_job_wake_slots alter column queue type text collate "C";

alter table x_outbox
  alter column id type text collate "C",
  alter column run_id type text collate "C",
  alter column name type text collate "C",
  alter column queue type text collate "C",
  alter column tenant_id type text collate "C",
  alter column idempotency_key type text collate "C",
  alter column claimed_by type text collate "C";

alter table x_backfills
  alter column name type text collate "C",
  alter column run_id type text collate "C";

alter table x_scheduler_state alter column task type text collate "C";

alter table x_task_fires alter column task type text collate "C";
