-- ack: settle up to N running rows `done` in one statement (the driver coalesces acks that
-- arrive while one is in flight). Each row is fenced on its claim (claimed_by, claim) and on
-- state = 'running', so a lapsed or cancelled attempt settles nothing. The `done` counter and
-- the run's duration move in this same statement; a throttled progress write still pending
-- for the run lands here too (progress null: keep the stored one).
-- The rows are found through the primary key (`id = any($1)`), whatever plan is cached, and
-- nothing is joined: each row looks its own fence up in the batch, one JSON object
-- {id: {claim: {worker id: [duration ms, progress json text, result json text]}}}, at the path
-- (id, claim, claimed_by); a jsonb object's keys are sorted, so each step is a binary search.
-- The batch is parsed once, in `batch`; the three places that read it each take it from there.
-- (Joined to the unnested arrays instead, the generic plan was a nested loop re-reading the
-- whole batch for every row; tests/integration/test_postgres_ack_plan.py holds it to one pass.)
-- 'running' comes as $6, not as a literal: against the literal a generic plan can AND the
-- primary key probe with the running index, and a bitmap scan reads every entry of that
-- index, dead ones included, until VACUUM removes them.
-- The body's result (json text, absent or null: none) is stored in the same write
-- (migration 0023), and a row a result wait marked (result_waited) announces its id on
-- `x_jobs_settled`: only those, so an ack nobody waits for notifies nothing.
-- Children (migration 0027): the rows a parent waits for (parent_waits) take their count off
-- each parent's children_waited (grouped: one update per parent per batch, however many of
-- its children the batch settles); a suspended parent whose count reaches zero is due now,
-- with its count cleared, and announced on x_jobs_wake; each row answered carries the queues
-- of the parents woken (the driver tells this process's workers at once). A row that is
-- nobody's child joins nothing here. The parent is matched by its id alone, never by a
-- condition on its count: a wait that marked the child after this statement's snapshot
-- leaves the parent's count null in that snapshot, and only a row the update reaches is read
-- again at its latest version (a null count minus n stays null: a parent nobody counted).
-- Fleet slots (job.concurrency): the slot each run of the batch holds, if any, is deleted in
-- this same statement, keyed on (key, holder) exactly as lease_release.sql (never another
-- holder's row of the key), whether or not the row's fence matched: the run is over either
-- way. A statement that fails takes the release back with the settle, so the slot stays
-- held until the worker releases it on its own or its TTL lapses.
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
  returning j.id, j.claimed_by, j.claim, j.name,
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
)
select s.id, s.claimed_by, s.claim,
       (select array_agg(distinct w.queue) from woke w where w.woken) as woke
  from settled s
