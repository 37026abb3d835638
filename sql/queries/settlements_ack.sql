-- settlements_ack: ack.sql, plus one x_settlements row ('completed') per row it settles, in
-- the same statement (the Postgres driver runs it instead of ack when its settlements are on;
-- off, the hot ack stays the statement it was). Everything else is ack.sql's: read it there.
-- $1 ids  $2 the batch (json text)  $3 now ms  $4 counter bucket width ms
-- $5 counter bucket start ms  $6 'running'  $7 slot keys  $8 their holders (pairwise)
with batch as materialized (select $2::text::jsonb as b),
settled as (
  update x_jobs j
     set state = 'done',
         finished_at = x_ts($3::bigint),
         updated_at = x_ts($3::bigint),
         lease_expires_at = null,
         progress = coalesce(((select b from batch)
                               #>> array[j.id, j.claim::text, j.claimed_by, '1'])::jsonb,
                             j.progress),
         result = ((select b from batch)
                   #>> array[j.id, j.claim::text, j.claimed_by, '2'])::jsonb
   where j.id = any($1::text[])
     and j.state = $6::text
     and (select b from batch) #> array[j.id, j.claim::text, j.claimed_by] is not null
  returning j.id, j.claimed_by, j.claim, j.name, j.run_id, j.tenant_id, j.attempt,
            ((select b from batch)
             #>> array[j.id, j.claim::text, j.claimed_by, '0'])::bigint as duration_ms,
            case when j.result_waited then pg_notify('x_jobs_settled', j.id) end as told,
            j.parent_id, j.parent_waits
),
woke as (
  update x_jobs p
     set children_waited = case when p.state = 'suspended' and p.children_waited - w.n <= 0
                                then null else p.children_waited - w.n end,
         run_at = case when p.state = 'suspended' and p.children_waited - w.n <= 0
                       then x_ts($3::bigint) else p.run_at end
    from (select s.parent_id, count(*) as n from settled s
           where s.parent_waits group by s.parent_id order by s.parent_id) w
   where p.id = w.parent_id
  returning p.queue, p.state = 'suspended' and p.children_waited is null as woken,
            case when p.state = 'suspended' and p.children_waited is null
                 then pg_notify('x_jobs_wake', p.queue) end as told
),
released as (
  delete from x_job_leases l
   using unnest($7::text[], $8::text[]) as r(key, holder)
   where l.key = r.key and l.holder = r.holder
),
counted as (
  insert into x_job_counters as c (job, width_ms, bucket_start_ms, done, duration_ms)
  select s.name, $4::int, $5::bigint, count(*), coalesce(sum(greatest(s.duration_ms, 0)), 0)
    from settled s
   group by s.name
   order by s.name
  on conflict (job, width_ms, bucket_start_ms) do update
     set done = c.done + excluded.done, duration_ms = c.duration_ms + excluded.duration_ms
),
outbox as (
  insert into x_settlements (job_id, run_id, name, tenant_id, outcome, code, attempt, settled_at)
  select s.id, s.run_id, s.name, s.tenant_id, 'completed', null, s.attempt, x_ts($3::bigint)
    from settled s
   order by s.id
)
select s.id, s.claimed_by, s.claim,
       (select array_agg(distinct w.queue) from woke w where w.woken) as woke
  from settled s
