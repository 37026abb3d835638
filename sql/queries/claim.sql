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
-- planner took the band for a constant and, on a table whose statistics show one priority
-- (most deployments), walked x_jobs_claim_idx (queue, run_at, seq; dropped in 0031) filtering
-- on it: every due row of the queue read for each band it was short of.
-- The bands' walk has no ORDER BY on purpose: one would sort all ten bands' rows (locking up to
-- ten times $2 per queue) before the limit. A nested loop over the values list reads the bands
-- in the order they are written, so the queue's limit stops at the lowest bands; `picked`
-- orders what came back by (priority, run_at, seq) either way
-- (tests/integration/test_postgres_claim_plan.py holds the shape).
--
-- Priority first, fair inside a band (issue 41; the model is ujobs.drivers.fairness's
-- docstring, which the memory driver runs). In every queue not in $12, `fairq` finds the top
-- band (the lowest priority with a due row: one descent per band over
-- x_jobs_claim_priority_idx, as the bands' walk makes, each a lateral with LIMIT 1 in that
-- index's order, under min(); as an EXISTS the planner turned it into a semi join reading
-- every due row of the queue through x_jobs_fair_idx: 18 ms of a 20 ms claim over 20,000
-- rows) and the queue's cursor
-- (x_fair_cursors); the claim walks that band's tenants with claimable rows from the cursor,
-- a loose index scan over x_jobs_fair_idx (queue, priority, coalesce(tenant_id, ''), run_at,
-- seq; 0030): `ahead` takes the next tenant after the cursor, one index descent per tenant,
-- up to $2 of them; `behind` wraps round from the first tenant up to the cursor for the
-- rest. So a claim visits at most $2 tenants (2 x $2 descents) however many have work, and
-- each visited tenant's rows are the head of its own index range. `fair` locks each walked
-- tenant's oldest min($2, weight x rounds) due rows of the band (rounds = ceil($2 / the walked
-- tenants' weights), weights from x_tenant_weights, 1 by absence); row i of a tenant of
-- weight w is in round ceil(i / w). `fill` is the bands' walk above over the slots each queue's
-- fair rows leave (every queue; a strict one whole), excluding the fair rows (this
-- statement's own locks do not skip them). `picked` is the hand-out order, by priority, and
-- within a band: lapsed rows (run_at, seq), then the fair rows (by round, place in the walk,
-- queue, i), then the fill (run_at, seq); the rows come back in that order, and each fair queue's cursor moves to
-- the tenant of its last fair row handed out (`moved`; a cursor already there is not rewritten:
-- a queue of one tenant, most, writes no new version of its cursor row per claim).
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
-- $12 strict queues: served by priority then first-in first-out (fair=False,
--     UJOBS_STRICT_QUEUES)
-- claim_slots.sql is this statement plus the fleet slots it takes: a change here is made there
-- too (tests/unit/test_claim_slots_sql.py fails until it is).
with recursive queues as (
  select q.name
    from unnest($1::text[]) as q(name)
   where not exists (select 1 from x_job_pauses p where p.kind = 'queue' and p.name = q.name)
),
bands as (
  select b.priority from (values (0::smallint), (1::smallint), (2::smallint), (3::smallint),
                                 (4::smallint), (5::smallint), (6::smallint), (7::smallint),
                                 (8::smallint), (9::smallint)) as b(priority)
),
fairq as (
  select q.name, t.band, (select c.tenant from x_fair_cursors c where c.queue = q.name) as cursor
    from queues q
   cross join lateral (
     select min(b.priority) as band
       from bands b
      cross join lateral (
        select 1
          from x_jobs j
         where j.queue = q.name
           and (j.priority, j.run_at) >= (b.priority, '-infinity'::timestamptz)
           and (j.priority, j.run_at) <= (b.priority, x_ts($4::bigint))
           and j.state in ('ready', 'delayed', 'suspended')
         order by j.priority, j.run_at
         limit 1) hit) t
   where q.name <> all($12::text[])
     and t.band is not null
),
ahead as (
  select f.name as queue, f.band, a.tenant, 1 as depth
    from fairq f
   cross join lateral (
     select coalesce(j.tenant_id, '') as tenant
       from x_jobs j
      where j.queue = f.name
        and j.priority = f.band
        and coalesce(j.tenant_id, '') > f.cursor
        and j.state in ('ready', 'delayed', 'suspended')
      order by coalesce(j.tenant_id, '')
      limit 1) a
   where f.cursor is not null
  union all
  select w.queue, w.band, a.tenant, w.depth + 1
    from ahead w
   cross join lateral (
     select coalesce(j.tenant_id, '') as tenant
       from x_jobs j
      where j.queue = w.queue
        and j.priority = w.band
        and coalesce(j.tenant_id, '') > w.tenant
        and j.state in ('ready', 'delayed', 'suspended')
      order by coalesce(j.tenant_id, '')
      limit 1) a
   where w.depth < $2::int
),
fairb as (
  select f.name, f.band, f.cursor,
         $2::int - (select count(*) from ahead a where a.queue = f.name) as room
    from fairq f
),
behind as (
  select f.name as queue, f.band, b.tenant, 1 as depth
    from fairb f
   cross join lateral (
     select coalesce(j.tenant_id, '') as tenant
       from x_jobs j
      where j.queue = f.name
        and j.priority = f.band
        and j.state in ('ready', 'delayed', 'suspended')
      order by coalesce(j.tenant_id, '')
      limit 1) b
   where f.room > 0 and (f.cursor is null or b.tenant <= f.cursor)
  union all
  select w.queue, w.band, b.tenant, w.depth + 1
    from behind w
    join fairb f on f.name = w.queue
   cross join lateral (
     select coalesce(j.tenant_id, '') as tenant
       from x_jobs j
      where j.queue = w.queue
        and j.priority = w.band
        and coalesce(j.tenant_id, '') > w.tenant
        and j.state in ('ready', 'delayed', 'suspended')
      order by coalesce(j.tenant_id, '')
      limit 1) b
   where w.depth < f.room and (f.cursor is null or b.tenant <= f.cursor)
),
walked as (
  select w.queue, w.band, w.tenant, w.place, w.weight,
         ceil($2::numeric / sum(w.weight) over (partition by w.queue))::int as rounds
    from (select s.queue, s.band, s.tenant, coalesce(tw.weight, 1) as weight,
                 row_number() over (partition by s.queue order by s.part, s.depth) as place
            from (select a.queue, a.band, a.tenant, 0 as part, a.depth from ahead a
                  union all
                  select b.queue, b.band, b.tenant, 1 as part, b.depth from behind b) s
            left join x_tenant_weights tw on tw.tenant_id = s.tenant) w
),
fair as (
  select f.id, f.run_at, f.seq, w.queue, w.band, w.tenant, w.place, w.weight,
         row_number() over (partition by w.queue, w.tenant order by f.run_at, f.seq) as i
    from walked w
   cross join lateral (
     select j.id, j.run_at, j.seq
       from x_jobs j
      where j.queue = w.queue
        and j.priority = w.band
        and coalesce(j.tenant_id, '') = w.tenant
        and j.state in ('ready', 'delayed', 'suspended')
        and j.run_at <= x_ts($4::bigint)
      order by j.run_at, j.seq
      limit least($2::int, w.weight * w.rounds)
        for update skip locked) f
),
fill as (
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
           and j.id <> all(array(select f.id from fair f))
         order by j.priority, j.run_at, j.seq
         limit $2::int
           for update skip locked) r
      limit greatest($2::int - (select count(*) from fair f where f.queue = q.name), 0)) d
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
  select c.id, c.part, c.queue, c.tenant,
         row_number() over (order by c.priority, c.part, c.round, c.place, c.queue, c.i,
                                     c.run_at, c.seq) as n
    from (select l.id, l.priority, 0 as part, 0::bigint as round, 0::bigint as place,
                 ''::text as queue, ''::text as tenant, 0::bigint as i, l.run_at, l.seq
            from lapsed l where not l.final
          union all
          select f.id, f.band, 1, ceil(f.i::numeric / f.weight)::bigint, f.place, f.queue,
                 f.tenant, f.i, f.run_at, f.seq
            from fair f
          union all
          select d.id, d.priority, 2, 0, 0, '', '', 0, d.run_at, d.seq from fill d) c
   order by n
   limit $2::int
),
moved as (
  insert into x_fair_cursors as c (queue, tenant)
  select distinct on (p.queue) p.queue, p.tenant
    from picked p
   where p.part = 1
   order by p.queue, p.n desc
  on conflict (queue) do update set tenant = excluded.tenant
   where c.tenant is distinct from excluded.tenant
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
  from (select 'claimed' as kind, p.n, c.* from claimed c join picked p on p.id = c.id
        union all
        select 'buried' as kind, null as n, b.* from buried b) x
 order by x.kind desc, x.n, x.priority, x.run_at, x.seq
