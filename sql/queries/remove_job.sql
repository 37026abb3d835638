-- remove_job: delete one job that is not running, and its steps when no other row still
-- shares its run (its run_id under its tenant: a run_id is a namespace of its tenant).
-- prior_state tells the driver "not found" from "running" (refused).
-- $1 id
with target as (select j.id, j.state from x_jobs j where j.id = $1::text),
removed as (
  delete from x_jobs j
   where j.id = $1::text and j.state <> 'running'
  returning j.run_id, coalesce(j.tenant_id, '') as tenant
),
steps as (
  delete from x_job_steps s using removed r
   where s.run_id = r.run_id
     and s.tenant_id = r.tenant
     and not exists (select 1 from x_jobs o
                      where o.run_id = r.run_id
                        and coalesce(o.tenant_id, '') = r.tenant
                        and o.id <> $1::text)
  returning 1
)
select (select t.state from target t) as prior_state,
       (select count(*) from removed) as removed,
       (select count(*) from steps) as removed_steps
