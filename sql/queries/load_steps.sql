-- load_steps: the completed steps of a run of one tenant, in the order they were saved (a
-- run_id is a namespace of its tenant: null is the tenant-less jobs' own, stored as '').
-- $1 run id  $2 tenant id (or null)
select s.name, s.output::text as output, s.seq,
       x_ms(s.started_at) as started_at_ms, x_ms(s.finished_at) as finished_at_ms
  from x_job_steps s
 where s.run_id = $1::text
   and s.tenant_id = coalesce($2::text, '')
 order by s.seq
