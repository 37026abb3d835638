-- claim_slots: claim.sql for a worker whose registry holds jobs declared with `concurrency`
-- (ClaimOptions.slots not empty): the same statement, and it also takes the fleet slot of each
-- row it hands out. claim.sql's header says what every CTE up to `buried` and from it on does
-- and what $1..$12 are; the text of those CTEs is claim.sql's, word for word
-- (tests/unit/test_claim_slots_sql.py holds the two in step). A twin and not a flag on
-- claim.sql: the slot CTEs cost the hot claim of every other worker time even when they take
-- nothing, and the claim is the drain's hottest statement.
-- $13 the job names whose fleet slot this claim takes  $14 their limits (pairwise; empty: none)
-- $15 those of them whose busy key waits (a plain cap, or when_busy='wait'; empty: none)
--
-- Fleet slots (job.concurrency, ujobs.worker.concurrency): a claimed row of a job in $13 that
-- carries its lease key (`slot_key`, written at enqueue: 0032) takes its slot here, under
-- lease_acquire.sql's rules, so the run pays no lease statement and commit of its own (a row
-- claimed ahead holds it from the claim too: it is already this worker's next run, and under
-- load nearly every row is handed out ahead, so leaving them out would leave the cost):
-- `wanted` ranks the rows of each key in hand-out order; `open` lists each key's free slots
-- (none live, lowest first) as far as the live holders leave room under the limit; row k of a
-- key takes its key's k-th free slot (`slotted`: a lapsed holder's row is taken over, a live
-- one, committed by a concurrent acquirer after this snapshot, is not: ON CONFLICT re-reads
-- it). No holder can already hold: the holder id names the claim this statement counts, so
-- lease_acquire.sql's renewal has nothing to renew here. The holder id is the worker's
-- lease_holder(), which percent-encodes the job id: a row whose id has a byte that encoding
-- would change is left out. Each row answers `slot` (the key it holds) or null: the worker
-- then takes its slot through the lease store as before (a busy key waits or is refused
-- there, a lost race asks again).
--
-- A key with no room is not claimed (`kept`): a row of a $15 job whose key already has its
-- limit of live holders, counting the rows ahead of it in this claim, stays unclaimed, and
-- `deferred` makes it due now, behind every row already due, as the worker's hand back would
-- have (uncounted) after a claim, a lease round and a nack of its own. A backlog for one hot
-- key (one endpoint's deliveries) was claimed whole, a claim at a time, and handed back row by
-- row; moving its rows back keeps the other keys behind them from waiting on it. Rows
-- re-claimed from a lapsed lease and rows of a when_busy='fail' job are kept: the first must
-- be handed out again, the second refused.
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
kept as (
  select r.id, r.part, r.queue, r.tenant, row_number() over (order by r.n) as n
    from (select p.id, p.part, p.queue, p.tenant, p.n, j.slot_key,
                 s.lim - (select count(*) from x_job_leases l
                           where l.key = j.slot_key and l.expires_at > x_ts($4::bigint)) as room,
                 row_number() over (partition by j.slot_key, s.lim is null order by p.n) as k
            from picked p
            join x_jobs j on j.id = p.id
            left join unnest($13::text[], $14::int[]) as s(name, lim)
              on s.name = j.name and j.name = any($15::text[]) and j.slot_key is not null
                 and p.part <> 0) r
   where r.room is null or r.k <= r.room
),
deferred as (
  update x_jobs j
     set run_at = x_ts($4::bigint), updated_at = x_ts($4::bigint)
   where j.id = any(array(select p.id from picked p
                           where p.id <> all(array(select k.id from kept k))))
),
moved as (
  insert into x_fair_cursors as c (queue, tenant)
  select distinct on (p.queue) p.queue, p.tenant
    from kept p
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
         ahead = j.id = any(array(select p.id from kept p where p.n > $9::int)),
         claim = j.claim + 1,
         claimed_by = $3::text,
         lease_expires_at = x_ts($4::bigint + $5::bigint),
         updated_at = x_ts($4::bigint)
   where j.id = any(array(select p.id from kept p))
  returning j.*
),
wanted as (
  select c.id, c.slot_key as key, s.lim,
         c.id || '#' || c.claim || '@' || $3::text as holder,
         row_number() over (partition by c.slot_key order by p.n) as k
    from claimed c
    join kept p on p.id = c.id
    join unnest($13::text[], $14::int[]) as s(name, lim) on s.name = c.name
   where c.slot_key is not null
     and translate(c.id, 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-~',
                   '') = ''
),
open as (
  select w.key, f.slot, row_number() over (partition by w.key order by f.slot) as k
    from (select distinct on (w.key) w.key, w.lim from wanted w order by w.key) w
   cross join lateral (
     select s.slot
       from generate_series(0, w.lim - 1) as s(slot)
      where not exists (select 1 from x_job_leases l
                         where l.key = w.key and l.slot = s.slot
                           and l.expires_at > x_ts($4::bigint))
      order by s.slot
      limit greatest(w.lim - (select count(*) from x_job_leases l
                               where l.key = w.key and l.expires_at > x_ts($4::bigint)), 0)
   ) f
),
slotted as (
  insert into x_job_leases as l (key, slot, holder, acquired_at, expires_at)
  select w.key, o.slot, w.holder, x_ts($4::bigint), x_ts($4::bigint + $5::bigint)
    from wanted w
    join open o on o.key = w.key and o.k = w.k
   order by w.key, o.slot
  on conflict (key, slot) do update
     set holder = excluded.holder, acquired_at = excluded.acquired_at,
         expires_at = excluded.expires_at
   where l.expires_at <= x_ts($4::bigint)
  returning l.key, l.holder
),
held as (
  select w.id, w.key from wanted w join slotted s on s.key = w.key and s.holder = w.holder
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
       x.snoozes, x.priority, h.key as slot
  from (select 'claimed' as kind, p.n, c.* from claimed c join kept p on p.id = c.id
        union all
        select 'buried' as kind, null as n, b.* from buried b) x
  left join held h on h.id = x.id and x.kind = 'claimed'
 order by x.kind desc, x.n, x.priority, x.run_at, x.seq
