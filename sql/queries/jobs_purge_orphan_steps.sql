-- jobs_purge_orphan_steps: up to $1 step records whose run has no x_jobs row left: what a
-- sweep that died between a batch and its follow-up stranded. skip locked.
-- $1 limit
with doomed as (
  select s.run_id, s.name
    from x_job_steps s
   where not exists (select 1 from x_jobs j where j.run_id = s.run_id)
   limit $1::int
     for update skip locked
),
gone as (
  delete from x_job_steps s using doomed d
   where s.run_id = d.run_id and s.name = d.name
  returning 1
)
select count(*) as deleted from gone
