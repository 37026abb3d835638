-- requeue_many: re-queue finished rows of one state matching the filters, at most $5 per call,
-- oldest first. A row whose (name, tenant, key) a live job holds stays; of several finished
-- rows sharing one key only the oldest moves. `remaining` is what a second call could still
-- move (keys still free after this one), so "call until zero" ends. Announces each queue.
-- $1 state  $2 queue  $3 name  $4 tenant_id  $5 limit  $6 now ms
with free as (
  select distinct on (j.name, coalesce(j.tenant_id, ''), j.idempotency_key)
         j.id, j.created_at, j.seq
    from x_jobs j
   where j.state = $1::text
     and j.state in ('done', 'failed', 'dead', 'cancelled')
     and ($2::text is null or j.queue = $2::text)
     and ($3::text is null or j.name = $3::text)
     and ($4::text is null or j.tenant_id = $4::text)
     and not exists (
       select 1 from x_jobs o
        where o.name = j.name
          and coalesce(o.tenant_id, '') = coalesce(j.tenant_id, '')
          and o.idempotency_key = j.idempotency_key
          and o.state in ('ready', 'delayed', 'running', 'suspended'))
   order by j.name, coalesce(j.tenant_id, ''), j.idempotency_key, j.created_at, j.seq
),
chosen as (
  select f.id from free f order by f.created_at, f.seq limit $5::int
),
moved as (
  update x_jobs j
     set state = 'ready',
         attempt = 0,
         run_at = x_ts($6::bigint),
         finished_at = null,
         lease_expires_at = null,
         last_error = null,
         result = null,
         snoozes = 0,
         updated_at = x_ts($6::bigint)
    from chosen c
   where j.id = c.id and j.state = $1::text
  returning j.queue
),
woke as (
  select pg_notify('x_jobs_wake', d.queue) from (select distinct m.queue from moved m) d
)
select (select count(*) from moved) as affected,
       (select count(*) from free) - (select count(*) from moved) as remaining,
       (select count(*) from woke) as woke
