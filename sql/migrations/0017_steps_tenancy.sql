-- 0017: steps belong to one run of one tenant. A run_id is chosen by the caller (POST
-- /v1/jobs/{name} takes any `runId`), so keyed by run_id alone a second tenant enqueuing the
-- first one's id ("order-42") replayed its stored outputs, listed its step names and, through
-- retry --from-step, deleted them. A run_id is now a namespace of its tenant: x_job_steps
-- carries the tenant of the run (coalesce(x_jobs.tenant_id, ''): '' is the tenant-less jobs'
-- own namespace, as in x_jobs_name_tenant_idempotency_live_idx) and is keyed by it.
alter table x_job_steps add column tenant_id text collate "C" not null default '';

-- Existing rows take the tenant of their run's job. A run_id that jobs of several tenants
-- carried (what this migration closes) goes to the tenant whose job carried it FIRST: its steps
-- were stored before a later enqueue could reuse the id, and the later tenants' runs start
-- with no stored step (they run their own). One index descent per run, never a table sort.
update x_job_steps s
   set tenant_id = o.tenant
  from (select r.run_id, f.tenant
          from (select distinct st.run_id from x_job_steps st) r
          cross join lateral (select coalesce(j.tenant_id, '') as tenant
                                from x_jobs j
                               where j.run_id = r.run_id
                               order by j.created_at, j.seq
                               limit 1) f) o
 where s.run_id = o.run_id
   and o.tenant <> '';

-- Rows whose run has no job left are what a purge that died before its follow-up stranded
-- (the retention sweep deletes them anyway): no tenant can be told for them, and kept in the
-- tenant-less namespace a tenant-less job reusing the id would replay them. They go.
delete from x_job_steps s
 where not exists (select 1 from x_jobs j where j.run_id = s.run_id);

-- From here every insert names the tenant (save_step.sql reads it off the claimed row).
alter table x_job_steps alter column tenant_id drop default;

alter table x_job_steps
  drop constraint x_job_steps_pkey,
  add constraint x_job_steps_pkey primary key (run_id, tenant_id, name);
