-- jobs_purge_orphan_steps: up to $1 step records whose run (its run_id under its tenant) has no
-- x_jobs row left: what a sweep that died between a batch and its follow-up stranded. A row
-- of another tenant carrying the same run_id keeps nothing alive. skip locked.
-- $1 limit
with doomed as (
  select s.run_id, s.tenant_id, s.name
    from x_job_steps s
   where not exists (select 1 from x_jobs j
                      where j.run_id = s.run_id and coalesce(j.tenant_id, '') = s.tenant_id)
   limit $1::int
     for update skip locked
),
gone as (
  delete from x_job_steps s using doomed d
   where s.run_id = d.run_id and s.tenant_id = d.tenant_id and s.name = d.name
  returning 1
)
select count(*) as deleted from gone
