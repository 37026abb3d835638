-- queue_tenants: whose due work waits in one queue (ujobs queues show, GET /v1/queues/{queue},
-- the dashboard's queue page). A bounded read, whatever the backlog: the first $3 + 1 due rows
-- of the queue in hand-out order (priority, run_at, seq); the first $3 of them are grouped by
-- tenant, and a row past them means the counts are lower bounds (capped). The extra row only
-- says so: counted, it would add one row the cap left out to one tenant's figure.
-- The rows are read band by band, 0 to 9, as the claim walks them: per band an ordered range
-- of x_jobs_claim_priority_idx (queue, priority, run_at, seq) up to now, so future rows are
-- never read, and the walk stops after $3 + 1 rows (no ORDER BY over the bands: a nested loop
-- over generate_series reads them in order, and one would sort every band's rows before the
-- limit). `due` sorts only those $3 + 1 rows, to keep the first $3.
-- $1 queue  $2 now ms  $3 cap  $4 how many tenants
with read as (
  select b.priority, d.tenant_id, d.run_at, d.seq
    from generate_series(0, 9) b(priority)
   cross join lateral (
     select j.tenant_id, j.run_at, j.seq
       from x_jobs j
      where j.queue = $1::text
        and j.priority = b.priority
        and j.state in ('ready', 'delayed', 'suspended')
        and j.run_at <= x_ts($2::bigint)
      order by j.run_at, j.seq
      limit $3::int + 1) d
   limit $3::int + 1
),
due as (
  select r.tenant_id, r.run_at, r.seq
    from read r
   order by r.priority, r.run_at, r.seq
   limit $3::int
)
select d.tenant_id, count(*)::int as due, x_ms(min(d.run_at)) as oldest_due_ms,
       (select count(*) from read) > $3::int as capped
  from due d
 group by d.tenant_id
 order by count(*) desc, min(d.run_at), min(d.seq)
 limit $4::int
