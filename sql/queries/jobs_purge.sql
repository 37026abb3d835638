-- jobs_purge: delete up to $3 finished rows of state $1 whose finished_at is older than $2 (now
-- minus that state's retention, on the caller's clock), oldest first along
-- x_jobs_finished_idx from $4 (the finished_at the pass's previous batch reached, so a batch
-- does not walk the index entries its predecessors left dead; null: from the oldest), skip
-- locked (two sweeps split the work; a row a worker holds is never waited on). A row an
-- unpublished x_outbox row or a RUNNING x_backfills pass still names is kept. The steps of
-- every run left with no row go in the same statement (a run is a run_id under one tenant; it
-- is orphaned when every row it had is in this batch: counted through x_jobs_run_id_idx, not by
-- comparing the batch with itself); `shared` / `shared_tenants` answer the runs whose steps
-- stayed because a row this statement did not delete still shares them (jobs_purge_steps
-- settles those after the commit); `reached` is the newest finished_at deleted.
-- The literal state list is the partial index's own predicate: without it a GENERIC plan (what
-- the worker's pool forces) cannot prove `state = $1` is inside the index and sorts a seq scan
-- of the whole table instead (8.7 s a batch over a million rows). The delete finds its rows by
-- the primary key (`= any(array)`), never by a join a plan could turn into a table scan.
-- A done row enqueued with unique_for is kept while its period still holds its key
-- (finished_at + unique_for_ms after $5, now): purged, it would free the key early.
-- A child (parent_id, migration 0027) not enqueued detached is kept while its parent is live
-- (ready, delayed, running, suspended): the parent's wait reads its children's rows and
-- results when the last of them ends, which may be long after the first one's retention (a
-- fan-in over weeks); purged, the child would answer that wait as a job that does not exist.
-- The probe is a scalar subquery on the parent's primary key, run for a child row only: as
-- `not exists (... p.state in (live states))` the planner answered it with a bitmap scan of
-- every live row (the live-key index's predicate is those states) once per batch.
-- $1 state  $2 cutoff ms  $3 batch size  $4 from ms (or null)  $5 now ms
with doomed as (
  select j.id, j.run_id, j.finished_at
    from x_jobs j
   where j.state = $1::text
     and j.state in ('done', 'failed', 'dead', 'cancelled')
     and j.finished_at < x_ts($2::bigint)
     and j.finished_at >= coalesce(x_ts($4::bigint), '-infinity'::timestamptz)
     and (j.unique_for_ms is null or j.finished_at <= x_ts($5::bigint - j.unique_for_ms))
     and not exists (select 1 from x_outbox o where o.id = j.id and o.published_at is null)
     and not exists (select 1 from x_backfills b
                      where b.run_id = j.run_id and b.status = 'running')
     and (j.parent_id is null or j.parent_detached
          or coalesce((select p.state from x_jobs p where p.id = j.parent_id), 'gone')
             not in ('ready', 'delayed', 'running', 'suspended'))
   order by j.finished_at
   limit $3::int
     for update of j skip locked
),
gone as (
  delete from x_jobs j where j.id = any(array(select d.id from doomed d))
  returning j.id, j.run_id, coalesce(j.tenant_id, '') as tenant, j.finished_at
),
gone_runs as (
  select g.run_id, g.tenant, count(*) as n from gone g group by g.run_id, g.tenant
),
orphaned as (
  select r.run_id, r.tenant
    from gone_runs r
   where (select count(*) from x_jobs k
           where k.run_id = r.run_id and coalesce(k.tenant_id, '') = r.tenant) <= r.n
),
steps as (
  delete from x_job_steps s using orphaned o
   where s.run_id = o.run_id and s.tenant_id = o.tenant
  returning 1
),
kept as (
  select r.run_id, r.tenant
    from gone_runs r
   where not exists (select 1 from orphaned o where o.run_id = r.run_id and o.tenant = r.tenant)
)
select (select count(*) from gone) as deleted,
       (select count(*) from steps) as steps,
       array(select k.run_id from kept k order by k.run_id, k.tenant) as shared,
       array(select k.tenant from kept k order by k.run_id, k.tenant) as shared_tenants,
       (select x_ms(max(g.finished_at)) from gone g) as reached
