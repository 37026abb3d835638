-- resume: delete the pause; a resumed QUEUE is announced on x_jobs_wake.
-- $1 kind  $2 name
with gone as (
  delete from x_job_pauses p where p.kind = $1::text and p.name = $2::text
  returning p.kind, p.name
)
select count(pg_notify('x_jobs_wake', g.name)) as woke from gone g where g.kind = 'queue'
