-- promote_many: every row of one state (delayed or ready) matching the filters that still
-- waits on its run_at is due now, at most $5 per call, soonest first. `remaining` is the rows
-- still waiting after this call. Announces each queue.
-- $1 state  $2 queue  $3 name  $4 tenant_id  $5 limit  $6 now ms
with waiting as (
  select j.id, j.run_at, j.seq
    from x_jobs j
   where j.state = $1::text
     and j.state in ('delayed', 'ready')
     and j.run_at > x_ts($6::bigint)
     and ($2::text is null or j.queue = $2::text)
     and ($3::text is null or j.name = $3::text)
     and ($4::text is null or j.tenant_id = $4::text)
),
moved as (
  update x_jobs j
     set run_at = x_ts($6::bigint), state = 'ready', updated_at = x_ts($6::bigint)
   where j.id in (select w.id from waiting w order by w.run_at, w.seq limit $5::int)
     and j.state = $1::text
     and j.run_at > x_ts($6::bigint)
  returning j.queue
),
woke as (
  select pg_notify('x_jobs_wake', d.queue) from (select distinct m.queue from moved m) d
)
select (select count(*) from moved) as affected,
       (select count(*) from waiting) - (select count(*) from moved) as remaining,
       (select count(*) from woke) as woke
