-- remove_job: delete one job that is not running, and its steps when no other row still
-- shares its run. prior_state tells the driver "not found" from "running" (refused).
-- $1 id
with target as (select j.id, j.state from x_jobs j where j.id = $1::text),
removed as (
  delete from x_jobs j
   where j.id = $1::text and j.state <> 'running'
  returning j.run_id
),
steps as (
  delete from x_job_steps s using removed r
   where s.run_id = r.run_id
     and not exists (select 1 from x_jobs o where o.run_id = r.run_id and o.id <> $1::text)
  returning 1
)
select (select t.state from target t) as prior_state,
       (select count(*) from removed) as removed,
       (select count(*) from steps) as removed_steps
