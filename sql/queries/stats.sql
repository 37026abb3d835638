-- stats: per queue and state, with how many claimable rows are due, the oldest due run_at, and
-- whether the figure is capped. Its cost does not grow with the backlog (issue 42): every part
-- is a bounded index read, never a scan of x_jobs.
--   * queues: a skip scan (one index probe per distinct queue) of an index over the claimable
--     rows (each leads with queue) and of the running index;
--   * claimable rows (ready, delayed, suspended): per queue, at most $2 + 1 rows of
--     x_jobs_claim_priority_idx (queue, priority, run_at, seq) in hand-out order, band by band
--     (0..9, each an ordered range stopping at $2 + 1; no ORDER BY over the bands, which would
--     sort every band's rows before the limit: the nested loop over generate_series reads
--     them in order and stops after $2 + 1). The counts are exact unless the queue holds more
--     than $2 claimable rows (then `capped`: lower bounds);
--   * the oldest due run_at: per queue, the first due entry of each band (ten one-row probes),
--     the least of them; exact whatever the backlog. It is the queue's, on each of its
--     claimable rows;
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
     select r.state, r.run_at
       from generate_series(0, 9) b(priority)
      cross join lateral (
        select j.state, j.run_at from x_jobs j
         where j.queue = q.queue and j.priority = b.priority
           and j.state in ('ready', 'delayed', 'suspended')
         order by j.run_at, j.seq
         limit $2::int + 1) r
      limit $2::int + 1) c
   where q.queue is not null
), oldest as (
  select q.queue, min(o.run_at) as run_at
    from claimable_queues q
   cross join generate_series(0, 9) b(priority)
   cross join lateral (
     select j.run_at from x_jobs j
      where j.queue = q.queue and j.priority = b.priority
        and j.state in ('ready', 'delayed', 'suspended')
        and j.run_at <= x_ts($1::bigint)
      order by j.run_at, j.seq
      limit 1) o
   where q.queue is not null
   group by q.queue
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
select c.queue, c.state, c.n, c.due, x_ms(o.run_at) as oldest_due_ms, c.capped
  from (select c.queue, c.state, count(*) as n,
               count(*) filter (where c.run_at <= x_ts($1::bigint)) as due,
               bool_or(c.seen > $2::int) as capped
          from claimable c
         group by c.queue, c.state) c
  left join oldest o on o.queue = c.queue
union all
select r.queue, r.state, r.n, 0, null, r.n > $2::int
  from running r
union all
select f.queue, f.state, count(*), 0, null, bool_or(f.seen > $2::int)
  from finished f
 group by f.queue, f.state
 order by 1, 2
