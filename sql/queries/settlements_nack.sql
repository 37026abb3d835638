-- settlements_nack: nack.sql, plus one x_settlements row per attempt it ends (the counter
-- kind $9: retried, failed or dead; a hand-back or a park ends nothing and writes none), in
-- the same statement. The code is the X_… code last_error's headline starts with (null for
-- an error that is not ours). The Postgres driver runs it instead of nack when its
-- settlements are on. Everything else is nack.sql's: read it there.
-- $1 id  $2 worker id  $3 claim  $4 target state  $5 counted  $6 error  $7 run_at ms (null:
-- now)  $8 now ms  $9 counter kind  $10 bucket width ms  $11 bucket start ms  $12 progress
-- $13 unreachable cap (null: not an outage hand-back)  $14 attempt errors kept  $15 characters
-- kept of each (a counted nack with an error appends one, migration 0021)  $16 a snooze (adds
-- one to snoozes, migration 0022)  $17 the fleet slot the run holds (null: none)  $18 its
-- holder
with settled as (
  update x_jobs j
     set state = $4::text,
         attempt = case when $5::bool then j.attempt else greatest(j.attempt - 1, 0) end,
         last_error = coalesce($6::text, j.last_error),
         attempt_errors = case
           when $5::bool and $6::text is not null then jsonb_path_query_array(
             j.attempt_errors || jsonb_build_array(jsonb_build_object(
               'attempt', j.attempt, 'error', left($6::text, $15::int), 'atMs', $8::bigint)),
             '$[last - $keep to last]', jsonb_build_object('keep', $14::int - 1))
           else j.attempt_errors end,
         run_at = case when $4::text in ('dead', 'failed') then j.run_at
                       when $4::text = 'suspended' and j.children_waited <= 0 then x_ts($8::bigint)
                       else x_ts(coalesce($7::bigint, $8::bigint)) end,
         children_waited = case when $4::text = 'suspended' and j.children_waited <= 0 then null
                                else j.children_waited end,
         finished_at = case when $4::text in ('dead', 'failed') then x_ts($8::bigint) end,
         lease_expires_at = null,
         updated_at = x_ts($8::bigint),
         progress = coalesce($12::text::jsonb, j.progress),
         unreachable_returns = j.unreachable_returns + (case when $13::int is null then 0 else 1 end),
         snoozes = j.snoozes + (case when $16::bool then 1 else 0 end)
   where j.id = $1::text
     and j.claimed_by = $2::text
     and j.claim = $3::int
     and j.state = 'running'
     and ($13::int is null or j.unreachable_returns < $13::int)
  returning j.id, j.run_id, j.name, j.tenant_id, j.attempt,
            case when j.result_waited and $4::text in ('dead', 'failed')
                 then pg_notify('x_jobs_settled', j.id) end as told,
            j.parent_id, j.parent_waits
),
woke as (
  update x_jobs p
     set children_waited = case when p.state = 'suspended' and p.children_waited <= 1
                                then null else p.children_waited - 1 end,
         run_at = case when p.state = 'suspended' and p.children_waited <= 1
                       then x_ts($8::bigint) else p.run_at end
    from settled s
   where p.id = s.parent_id
     and s.parent_waits
     and $4::text in ('dead', 'failed')
  returning p.queue, p.state = 'suspended' and p.children_waited is null as woken,
            case when p.state = 'suspended' and p.children_waited is null
                 then pg_notify('x_jobs_wake', p.queue) end as told
),
released as (
  delete from x_job_leases l
   where l.key = $17::text and l.holder = $18::text
),
counted as (
  insert into x_job_counters as c (job, width_ms, bucket_start_ms, retried, failed, dead)
  select s.name, $10::int, $11::bigint,
         (case when $9::text = 'retried' then 1 else 0 end),
         (case when $9::text = 'failed' then 1 else 0 end),
         (case when $9::text = 'dead' then 1 else 0 end)
    from settled s
   where $9::text is not null
  on conflict (job, width_ms, bucket_start_ms) do update
     set retried = c.retried + excluded.retried,
         failed = c.failed + excluded.failed,
         dead = c.dead + excluded.dead
),
outbox as (
  insert into x_settlements (job_id, run_id, name, tenant_id, outcome, code, attempt, settled_at)
  select s.id, s.run_id, s.name, s.tenant_id, $9::text,
         substring($6::text from '^(X_[A-Z0-9_]+)'), s.attempt, x_ts($8::bigint)
    from settled s
   where $9::text is not null
)
select count(*) as settled,
       (select w.queue from woke w where w.woken) as woke
  from settled
