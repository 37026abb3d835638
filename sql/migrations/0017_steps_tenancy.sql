-- 0017: steps belong to one run of one tenant. A run_id is chosen by the caller (POST
-- /v1/jobs/{name} takes any `runId`), so keyed by run_id alone a second tenant enqueuing the
-- first one's id ("order-42") replayed its stored outputs, listed its step names and, through
-- retry --from-step, deleted them. A run_id is now a namespace of its tenant: x_job_steps
-- carries the tenant of the run (coalesce(x_jobs.tenant_id, ''): '' is the tenant-less jobs'
-- own namespace, as in x_jobs_name_tenant_idempotency_live_idx) and is keyed by it.
alter table x_job_steps add column tenant_id text collate "C";

-- Existing rows take the tenant of the job that wrote them. A step is saved while its job runs,
-- so its writer is among the jobs carrying its run_id that existed when it finished (created
-- no later than its finished_at, give or take a minute of skew between the enqueuer's and the
-- worker's clocks):
-- * one tenant among those: the step is that tenant's;
-- * none (the writer is gone; its steps stayed because another row still carried the run):
--   the tenant of the rows that carry the run now, when they are of one tenant (a run
--   continued under a later row of its tenant keeps its steps);
-- * otherwise (jobs of two tenants shared the run, the hole this closes, and their outputs
--   cannot be told apart; or no job carries the run any more): no tenant, and the row goes
--   rather than hand one tenant what another may have stored. That run runs the step again.
-- Two index descents (x_jobs_run_id_idx) per step row.
update x_job_steps s
   set tenant_id = o.owner
  from (select st.run_id, st.name,
               case
                 when cardinality(w.tenants) = 1 then w.tenants[1]
                 when cardinality(w.tenants) = 0 and cardinality(c.tenants) = 1 then c.tenants[1]
               end as owner
          from x_job_steps st
          cross join lateral (
            select array(select distinct coalesce(j.tenant_id, '')
                           from x_jobs j
                          where j.run_id = st.run_id
                            and j.created_at <= st.finished_at + interval '1 minute') as tenants
          ) w
          cross join lateral (
            select array(select distinct coalesce(j.tenant_id, '')
                           from x_jobs j
                          where j.run_id = st.run_id) as tenants
          ) c) o
 where s.run_id = o.run_id
   and s.name = o.name;

delete from x_job_steps s where s.tenant_id is null;

alter table x_job_steps alter column tenant_id set not null;

alter table x_job_steps
  drop constraint x_job_steps_pkey,
  add constraint x_job_steps_pkey primary key (run_id, tenant_id, name);
