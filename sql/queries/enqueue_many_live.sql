-- enqueue_many_live: enqueue_many.sql for the api's group commit (a group of single enqueues
-- coalesced by services/api_enqueue_batcher.py), with each row's token check folded into the
-- same statement: a row whose "token" is set is inserted only while that api token is live
-- (not revoked, not expired at $2), as enqueue_insert_live.sql does for a request sent alone.
-- One round trip per group where a liveness query and then the insert took two; a revoke
-- committed before the statement started refuses the rows of that token and no other.
-- Dedupe, the wake and the answer are enqueue_many.sql's; each row NOT inserted comes back
-- with live: false (its token is dead: nothing was inserted for it) or with its holder's ids
-- (deduped), or with nulls (raced: the driver resends it).
-- $1 the jobs, enqueue_many.sql's JSON objects plus "token" (the api token id that must be
-- live, or null)  $2 now ms  $3 wake slot (null: announce nothing)  $4 due-by ms
with req as (
  select *
    from rows from (jsonb_to_recordset($1::text::jsonb)
                    as (id text, run_id text, name text, queue text, input jsonb,
                        tenant_id text, idempotency_key text, max_attempts int,
                        run_at_ms bigint, traceparent text, enqueued_by text,
                        priority smallint, token text))
         with ordinality as r(id, run_id, name, queue, input, tenant_id, idempotency_key,
                              max_attempts, run_at_ms, traceparent, enqueued_by, priority,
                              token, ord)
),
live as (
  select t.id
    from x_api_tokens t
   where t.id in (select r.token from req r where r.token is not null)
     and t.revoked_at is null
     and (t.expires_at is null or t.expires_at > x_ts($2::bigint))
),
allowed as (
  select r.* from req r where r.token is null or r.token in (select l.id from live l)
),
inserted as (
  insert into x_jobs (id, run_id, name, queue, state, input, tenant_id, idempotency_key,
                      max_attempts, run_at, created_at, updated_at, traceparent, enqueued_by,
                      priority)
  select r.id, r.run_id, r.name, r.queue,
         case when r.run_at_ms > $2::bigint then 'delayed' else 'ready' end,
         coalesce(r.input, 'null'::jsonb), r.tenant_id, r.idempotency_key, r.max_attempts,
         x_ts(r.run_at_ms), x_ts($2::bigint), x_ts($2::bigint), r.traceparent, r.enqueued_by,
         coalesce(r.priority, 0)
    from allowed r
   order by r.ord
  on conflict do nothing
  returning id, run_id, queue, run_at
),
woke as (
  insert into x_job_wake_slots as w (queue, slot)
  select d.queue, $3::bigint
    from (select distinct i.queue from inserted i where i.run_at <= x_ts($4::bigint)) d
   where $3::bigint is not null
     and not exists (select 1 from x_job_wake_slots s where s.queue = d.queue and s.slot >= $3::bigint)
   order by d.queue
  on conflict (queue) do update set slot = excluded.slot where w.slot < excluded.slot
  returning pg_notify('x_jobs_wake', w.queue)
),
skipped as (
  select r.* from req r where not exists (select 1 from inserted i where i.id = r.id)
)
-- One row per job that was NOT inserted, plus one summary row (ord 0) so the caller always
-- hears how many announcements went out. A job not listed was inserted under the ids sent.
select s.ord, a.id is not null as live, h.id, h.run_id, (select count(*) from woke) as woke
  from skipped s
  left join allowed a on a.ord = s.ord
  left join lateral (
    (select j.id, j.run_id from x_jobs j where a.id is not null and j.id = s.id)
    union all
    (select j.id, j.run_id from x_jobs j
      where a.id is not null
        and j.name = s.name
        and coalesce(j.tenant_id, '') = coalesce(s.tenant_id, '')
        and j.idempotency_key = s.idempotency_key
        and j.state in ('ready', 'delayed', 'running', 'suspended'))
    limit 1) h on true
union all
select 0, true, null, null, (select count(*) from woke)
