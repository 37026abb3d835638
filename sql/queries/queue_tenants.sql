-- queue_tenants: whose due work waits in one queue (ujobs queues show, GET /v1/queues/{queue},
-- the dashboard's queue page). A bounded read, whatever the backlog: the $3 + 1 oldest due rows
-- of the queue in hand-out order (the claim index), grouped by tenant; more than $3 means the
-- counts are lower bounds (capped).
-- $1 queue  $2 now ms  $3 cap  $4 how many tenants
with due as (
  select j.tenant_id, j.run_at, j.seq
    from x_jobs j
   where j.queue = $1::text
     and j.state in ('ready', 'delayed', 'suspended')
     and j.run_at <= x_ts($2::bigint)
   order by j.run_at, j.seq
   limit $3::int + 1
)
select d.tenant_id, count(*)::int as due, x_ms(min(d.run_at)) as oldest_due_ms,
       (select count(*) from due) > $3::int as capped
  from due d
 group by d.tenant_id
 order by count(*) desc, min(d.run_at), min(d.seq)
 limit $4::int
