-- save_step: persist one completed step of a run, only while the row is running under this
-- claim (the row is share-locked for the statement, so a cancel cannot slip in between the
-- check and the write). A step already saved under that name keeps its first output. The step
-- is stored under the ROW's tenant (a run_id is a namespace of its tenant), read with the fence.
-- $1 job id  $2 worker id  $3 claim  $4 run id  $5 step name  $6 output json text
-- $7 started_at ms  $8 now ms
with owner as (
  select j.id, coalesce(j.tenant_id, '') as tenant
    from x_jobs j
   where j.id = $1::text
     and j.claimed_by = $2::text
     and j.claim = $3::int
     and j.state = 'running'
     and j.run_id = $4::text
     for share
),
saved as (
  insert into x_job_steps (run_id, tenant_id, name, output, started_at, finished_at)
  select $4::text, o.tenant, $5::text, $6::text::jsonb, x_ts($7::bigint), x_ts($8::bigint)
    from owner o
  on conflict (run_id, tenant_id, name) do nothing
  returning 1
)
select exists (select 1 from owner) as owned, (select count(*) from saved) as saved
