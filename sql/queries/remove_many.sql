-- remove_many: delete rows of one state (never 'running') matching the filters, at most $5 per
-- call, oldest first, with the steps of runs no remaining row shares (a run is a run_id under
-- one tenant). `remaining` is what a second call could still delete.
-- $1 state  $2 queue  $3 name  $4 tenant_id  $5 limit
with matching as (
  select j.id, j.created_at, j.seq
    from x_jobs j
   where j.state = $1::text
     and j.state <> 'running'
     and ($2::text is null or j.queue = $2::text)
     and ($3::text is null or j.name = $3::text)
     and ($4::text is null or j.tenant_id = $4::text)
),
chosen as (
  select j.id
    from x_jobs j
   where j.id in (select m.id from matching m order by m.created_at, m.seq limit $5::int)
     for update skip locked
),
removed as (
  delete from x_jobs j using chosen c where j.id = c.id and j.state = $1::text
  returning j.id, j.run_id, coalesce(j.tenant_id, '') as tenant
),
steps as (
  delete from x_job_steps s
   where (s.run_id, s.tenant_id) in (select r.run_id, r.tenant from removed r)
     and not exists (select 1 from x_jobs o
                      where o.run_id = s.run_id
                        and coalesce(o.tenant_id, '') = s.tenant_id
                        and o.id not in (select r.id from removed r))
  returning 1
)
select (select count(*) from removed) as affected,
       (select count(*) from matching) - (select count(*) from removed) as remaining,
       (select count(*) from steps) as removed_steps
