-- claim: up to $2 rows of the queues $1 that are not paused, handed to worker $3, in one
-- statement. Takes due rows (ready/delayed/suspended with run_at <= now) and running rows whose
-- lease lapsed (the worker died), by priority first (0 before 9, across all the queues of $1),
-- then oldest due first (run_at, then seq). Per queue, a lateral over the ten bands (`bands`,
-- 0..9 in order) walks the partial claim index of ONE queue and ONE band
-- (x_jobs_claim_priority_idx, migration 0028: queue, priority, run_at, seq) in hand-out order,
-- each band stopping after $2 rows it could lock (FOR UPDATE SKIP LOCKED) and the queue after
-- $2 rows over its bands: an empty band costs one index descent, a full one never reads past
-- the rows it hands out, so the cost does not grow with the backlog and concurrent claimers
-- take disjoint rows and never read history.
-- A band is written as a range of (priority, run_at), from (b, -infinity) to (b, now), which is
-- exactly "priority = b and due", ordered by (priority, run_at, seq): only
-- x_jobs_claim_priority_idx serves that range in that order. Written as `priority = b`, the
-- planner takes the band for a constant and, on a table whose statistics show one priority
-- (most deployments), walks x_jobs_claim_idx filtering on it: every due row of the queue read
-- for each band it is short of.
-- The bands' walk has no ORDER BY on purpose: one would sort all ten bands' rows (locking up to
-- ten times $2 per queue) before the limit. A nested loop over the values list reads the bands
-- in the order they are written, so the queue's limit stops at the lowest bands; `picked`
-- orders what came back by (priority, run_at, seq) either way
-- (tests/integration/test_postgres_claim_plan.py holds the shape).
-- The lapsed arm walks x_jobs_running_lease_idx (queue, lease_expires_at) up to now, so it
-- reads only rows whose lease lapsed, however many run on live leases (0005).
-- A lapsed row already at attempt >= max_attempts is never handed out: the
-- second arm buries it (dead, or failed when its name is in $6) with
-- LEASE_LAPSED_FINAL_ATTEMPT and counts it, in this same statement; with $11 (the driver's
-- settlements on) each burial also writes its x_settlements row here (outcome dead or failed,
-- code LEASE_LAPSED_FINAL_ATTEMPT), so the NATS edge is told of a job no worker settled. A
-- flag and not a twin file as for ack/nack: burials are rare, so the idle insert costs the
-- claim nothing and the long statement stays one file. A lapsed row still
-- marked `ahead` (claimed ahead, never started: 0006) and handed back that way fewer than $10
-- times is neither buried nor counted again: it is handed out with the attempt its last claim
-- counted, and its `ahead_returns` grows by one. The rows past the first $9 in hand-out order
-- are claimed ahead (null: none). The updates find their
-- rows through the primary key (`id = any(array(...))`), so no cached plan joins the table.
-- $1 queues  $2 limit  $3 worker id  $4 now ms  $5 visibility ms  $6 drop_exhausted names
-- $7 counter bucket width ms  $8 counter bucket start ms  $9 rows started at once (null: all)
-- $10 the cap on a row's uncounted ahead hand-backs  $11 write the settlements outbox (bool)
with queues as (
  select q.name
    from unnest($1::text[]) as q(name)
   where not exists (select 1 from x_job_pauses p where p.kind = 'queue' and p.name = q.name)
),
bands as (
  select b.priority from (values (0::smallint), (1::smallint), (2::smallint), (3::smallint),
                                 (4::smallint), (5::smallint), (6::smallint), (7::smallint),
                                 (8::smallint), (9::smallint)) as b(priority)
),
due as (
  select d.id, d.priority, d.run_at, d.seq
    from queues q
   cross join lateral (
     select r.id, r.priority, r.run_at, r.seq
       from bands b
      cross join lateral (
        select j.id, j.priority, j.run_at, j.seq
          from x_jobs j
         where j.queue = q.name
           and (j.priority, j.run_at) >= (b.priority, '-infinity'::timestamptz)
           and (j.priority, j.run_at) <= (b.priority, x_ts($4::bigint))
           and j.state in ('ready', 'delayed', 'suspended')
         order by j.priority, j.run_at, j.seq
         limit $2::int
           for update skip locked) r
      limit $2::int) d
),
lapsed as (
  select l.id, l.priority, l.run_at, l.seq, l.final
    from queues q
   cross join lateral (
     select j.id, j.priority, j.run_at, j.seq,
            j.attempt >= j.max_attempts and not (j.ahead and j.ahead_returns < $10::int) as final
       from x_jobs j
      where j.queue = q.name
        and j.state = 'running'
        and j.lease_expires_at <= x_ts($4::bigint)
        for update skip locked) l
),
picked as (
  select c.id, row_number() over (order by c.priority, c.run_at, c.seq) as n
    from (select id, priority, run_at, seq from due
          union all
          select id, priority, run_at, seq from lapsed where not final) c
   order by c.priority, c.run_at, c.seq
   limit $2::int
),
claimed as (
  update x_jobs j
     set state = 'running',
         attempt = j.attempt + (case when j.state = 'running' and j.ahead
                                          and j.ahead_returns < $10::int then 0 else 1 end),
         ahead_returns = j.ahead_returns + (case when j.state = 'running' and j.ahead
                                                  and j.ahead_returns < $10::int then 1 else 0 end),
         ahead = j.id = any(array(select p.id from picked p where p.n > $9::int)),
         claim = j.claim + 1,
         claimed_by = $3::text,
         lease_expires_at = x_ts($4::bigint + $5::bigint),
         updated_at = x_ts($4::bigint)
   where j.id = any(array(select p.id from picked p))
  returning j.*
),
buried as (
  update x_jobs j
     set state = case when j.name = any($6::text[]) then 'failed' else 'dead' end,
         last_error = 'LEASE_LAPSED_FINAL_ATTEMPT',
         finished_at = x_ts($4::bigint),
         updated_at = x_ts($4::bigint),
         lease_expires_at = null
   where j.id = any(array(select l.id from lapsed l where l.final))
  returning j.*
),
counted as (
  insert into x_job_counters as c (job, width_ms, bucket_start_ms, dead, failed)
  select b.name, $7::int, $8::bigint,
         count(*) filter (where b.state = 'dead'),
         count(*) filter (where b.state = 'failed')
    from buried b
   group by b.name
   order by b.name
  on conflict (job, width_ms, bucket_start_ms) do update
     set dead = c.dead + excluded.dead, failed = c.failed + excluded.failed
),
outbox as (
  insert into x_settlements (job_id, run_id, name, tenant_id, outcome, code, attempt, settled_at)
  select b.id, b.run_id, b.name, b.tenant_id, b.state, 'LEASE_LAPSED_FINAL_ATTEMPT', b.attempt,
         x_ts($4::bigint)
    from buried b
   where $11::bool
   order by b.id
)
select x.kind, x.id, x.run_id, x.name, x.queue, x.input::text as input, x.tenant_id,
       x.idempotency_key, x.attempt, x.max_attempts, x.claimed_by, x.claim, x.state,
       x_ms(x.run_at) as run_at_ms, x_ms(x.created_at) as created_at_ms,
       x_ms(x.lease_expires_at) as lease_expires_at_ms, x.traceparent, x.enqueued_by, x.ahead,
       x.snoozes, x.priority
  from (select 'claimed' as kind, c.* from claimed c
        union all
        select 'buried' as kind, b.* from buried b) x
 order by x.kind desc, x.priority, x.run_at, x.seq
