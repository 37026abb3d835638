-- jobs_purge_steps: the follow-up of a jobs_purge batch, after its commit: the steps of the
-- runs in $1 that no x_jobs row names any more (two sweeps that split one run each kept its
-- steps; whichever follows up last sees both deletes committed).
-- $1 run ids
with gone as (
  delete from x_job_steps s
   where s.run_id = any($1::text[])
     and not exists (select 1 from x_jobs j where j.run_id = s.run_id)
  returning 1
)
select count(*) as deleted from gone
