-- jobs_purge: delete up to $3 finished rows of state $1 whose finished_at is older than $2 (now
-- minus that state's retention, on the caller's clock), oldest first along
-- x_jobs_finished_idx, skip locked (two sweeps split the work; a row a worker holds is never
-- waited on). A row an unpublished x_outbox row or a RUNNING x_backfills pass still names is
-- kept. The steps of every run left with no row go in the same statement; `shared` answers
-- the runs whose steps stayed because a row this statement did not delete still shares them
-- (jobs_purge_steps settles those after the commit).
-- $1 state  $2 cutoff ms  $3 batch size
with doomed as (
  select j.id, j.run_id
    from x_jobs j
   where j.state = $1::text
     and j.finished_at < x_ts($2::bigint)
     and not exists (select 1 from x_outbox o where o.id = j.id and o.published_at is null)
     and not exists (select 1 from x_backfills b
                      where b.run_id = j.run_id and b.status = 'running')
   order by j.finished_at
   limit $3::int
     for update of j skip locked
),
gone as (
  delete from x_jobs j using doomed d where j.id = d.id returning j.id, j.run_id
),
orphaned as (
  select distinct g.run_id
    from gone g
   where not exists (select 1 from x_jobs k
                      where k.run_id = g.run_id
                        and not exists (select 1 from gone x where x.id = k.id))
),
steps as (
  delete from x_job_steps s using orphaned o where s.run_id = o.run_id returning 1
)
select (select count(*) from gone) as deleted,
       (select count(*) from steps) as steps,
       array(select distinct g.run_id from gone g
              where not exists (select 1 from orphaned o where o.run_id = g.run_id)) as shared
