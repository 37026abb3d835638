-- jobs_purge_steps: the follow-up of a jobs_purge batch, after its commit: the steps of the
-- runs in ($1, $2) that no x_jobs row names any more (two sweeps that split one run each kept
-- its steps; whichever follows up last sees both deletes committed). A run is a run_id under
-- one tenant ('' the tenant-less jobs'): $1 and $2 are parallel arrays.
-- $1 run ids  $2 their tenants
with runs as (
  select u.run_id, u.tenant from unnest($1::text[], $2::text[]) as u(run_id, tenant)
),
gone as (
  delete from x_job_steps s using runs r
   where s.run_id = r.run_id
     and s.tenant_id = r.tenant
     and not exists (select 1 from x_jobs j
                      where j.run_id = s.run_id and coalesce(j.tenant_id, '') = s.tenant_id)
  returning 1
)
select count(*) as deleted from gone
