-- stats: per queue and state, with how many claimable rows are due, the oldest due run_at, and
-- whether the figure is capped. Its cost does not grow with the backlog (issue 42): every part
-- is a bounded index read, never a scan of x_jobs.
--   * queues: a skip scan (one index probe per distinct queue) of the claim index and of the
--     running index;
--   * claimable rows (ready, delayed, suspended): per queue, at most $2 + 1 rows of the claim
--     index in hand-out order, so the oldest due run_at is exact and the counts are exact
--     unless the queue holds more than $2 claimable rows (then `capped`: lower bounds);
--   * running rows: per queue, at most $2 + 1 entries of the running index;
--   * finished rows (done, failed, dead, cancelled): per state, the newest $2 + 1 rows of the
--     retention index, across queues; past that the state's figures are capped everywhere,
--     and a queue whose finished rows are all older than the window is not listed.
-- $1 now ms  $2 cap
with recursive claimable_queues(queue) as (
  (select j.queue from x_jobs j
    where j.state in ('ready', 'delayed', 'suspended')
    order by j.queue limit 1)
  union all
  select (select j.queue from x_jobs j
           where j.state in ('ready', 'delayed', 'suspended') and j.queue > q.queue
           order by j.queue limit 1)
    from claimable_queues q
   where q.queue is not null
), running_queues(queue) as (
  (select j.queue from x_jobs j where j.state = 'running' order by j.queue limit 1)
  union all
  select (select j.queue from x_jobs j
           where j.state = 'running' and j.queue > q.queue
           order by j.queue limit 1)
    from running_queues q
   where q.queue is not null
), claimable as (
  select q.queue, c.state, c.run_at, count(*) over (partition by q.queue) as seen
    from claimable_queues q
   cross join lateral (
     select j.state, j.run_at from x_jobs j
      where j.queue = q.queue and j.state in ('ready', 'delayed', 'suspended')
      order by j.run_at, j.seq
      limit $2::int + 1) c
   where q.queue is not null
), running as (
  select q.queue, 'running'::text as state, r.n
    from running_queues q
   cross join lateral (
     select count(*) as n from (
       select 1 from x_jobs j
        where j.queue = q.queue and j.state = 'running'
        limit $2::int + 1) l) r
   where q.queue is not null
), finished as (
  select f.queue, s.state, count(*) over (partition by s.state) as seen
    from unnest(array['done', 'failed', 'dead', 'cancelled']) s(state)
   cross join lateral (
     select j.queue from x_jobs j
      where j.state = s.state and j.state in ('done', 'failed', 'dead', 'cancelled')
      order by j.finished_at desc
      limit $2::int + 1) f
)
select c.queue, c.state, count(*) as n,
       count(*) filter (where c.run_at <= x_ts($1::bigint)) as due,
       x_ms(min(c.run_at) filter (where c.run_at <= x_ts($1::bigint))) as oldest_due_ms,
       bool_or(c.seen > $2::int) as capped
  from claimable c
 group by c.queue, c.state
union all
select r.queue, r.state, r.n, 0, null, r.n > $2::int
  from running r
union all
select f.queue, f.state, count(*), 0, null, bool_or(f.seen > $2::int)
  from finished f
 group by f.queue, f.state
 order by 1, 2
