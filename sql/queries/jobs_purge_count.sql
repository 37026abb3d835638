-- jobs_purge_count: how many x_jobs rows a jobs_purge pass would delete (ujobs db purge
-- --dry-run): done rows older than $1, dead/failed/cancelled rows older than $2, under the same
-- outbox and backfill guards, keeping a done row whose unique_for period still holds its key
-- and a child (not detached) whose parent is still live, as jobs_purge.sql does.
-- $1 done cutoff ms  $2 dead cutoff ms  $3 now ms
select count(*) as expired
  from x_jobs j
 where ((j.state = 'done' and j.finished_at < x_ts($1::bigint))
     or (j.state in ('dead', 'failed', 'cancelled') and j.finished_at < x_ts($2::bigint)))
   and (j.unique_for_ms is null or j.finished_at <= x_ts($3::bigint - j.unique_for_ms))
   and not exists (select 1 from x_outbox o where o.id = j.id and o.published_at is null)
   and not exists (select 1 from x_backfills b where b.run_id = j.run_id and b.status = 'running')
   and (j.parent_id is null or j.parent_detached
        or coalesce((select p.state from x_jobs p where p.id = j.parent_id), 'gone')
           not in ('ready', 'delayed', 'running', 'suspended'))
