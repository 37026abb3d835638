-- ack: settle up to N running rows `done` in one statement (the driver coalesces acks that
-- arrive while one is in flight). Each row is fenced on its claim (claimed_by, claim) and on
-- state = 'running', so a lapsed or cancelled attempt settles nothing. The `done` counter and
-- the run's duration move in this same statement; a throttled progress write still pending
-- for the run lands here too (progress null: keep the stored one).
-- The rows are found through the primary key (`id = any($1)`), whatever plan is cached.
-- $1 ids  $2 worker ids  $3 claims  $4 durations ms (null: none)  $5 progress json text
-- $6 now ms  $7 counter bucket width ms  $8 counter bucket start ms
with req as (
  select *
    from unnest($1::text[], $2::text[], $3::int[], $4::bigint[], $5::text[])
         as r(id, worker_id, claim, duration_ms, progress)
),
settled as (
  update x_jobs j
     set state = 'done',
         finished_at = x_ts($6::bigint),
         updated_at = x_ts($6::bigint),
         lease_expires_at = null,
         progress = coalesce(r.progress::jsonb, j.progress)
    from req r
   where j.id = any($1::text[])
     and j.id = r.id
     and j.claimed_by = r.worker_id
     and j.claim = r.claim
     and j.state = 'running'
  returning j.id, j.claimed_by, j.claim, j.name, r.duration_ms
),
counted as (
  insert into x_job_counters as c (job, width_ms, bucket_start_ms, done, duration_ms)
  select s.name, $7::int, $8::bigint, count(*), coalesce(sum(greatest(s.duration_ms, 0)), 0)
    from settled s
   group by s.name
   order by s.name
  on conflict (job, width_ms, bucket_start_ms) do update
     set done = c.done + excluded.done, duration_ms = c.duration_ms + excluded.duration_ms
)
select s.id, s.claimed_by, s.claim from settled s
