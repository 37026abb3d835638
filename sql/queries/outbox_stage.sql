-- outbox_stage: one staged enqueue, on the CALLER's connection inside its transaction. The row
-- id IS the job id and run_id the run's id, both minted before this statement, so the caller
-- is answered the job's real ids while the job does not exist yet.
-- The relay's wake: pg_notify('x_outbox_wake', ''), which Postgres delivers on COMMIT (never
-- for a rollback), unless a COMMITTED row is already waiting unclaimed - the relay has been
-- told about that one and its pass will take this row too. Rows of this same transaction
-- (xmin = ours) do not count: they are not committed. Identical notifications inside one
-- transaction collapse to one, so staging N rows costs one delivery.
-- $1 id  $2 run_id  $3 name  $4 queue  $5 input (json text)  $6 tenant_id
-- $7 idempotency_key  $8 max_attempts  $9 run_at ms (null: due at publish)  $10 traceparent
-- $11 enqueued_by  $12 staged_at ms  $13 priority
with staged as (
  insert into x_outbox (id, run_id, name, queue, input, tenant_id, idempotency_key,
                        max_attempts, run_at, traceparent, enqueued_by, staged_at, priority)
  values ($1::text, $2::text, $3::text, $4::text, $5::text::jsonb, $6::text, $7::text,
          $8::int, x_ts($9::bigint), $10::text, $11::text, x_ts($12::bigint), $13::smallint)
  returning id, run_id
),
woke as (
  select pg_notify('x_outbox_wake', '')
   where not exists (
     select 1 from x_outbox o
      where o.published_at is null
        and o.claimed_at is null
        and o.xmin <> pg_current_xact_id()::xid)
)
select s.id, s.run_id, (select count(*) from woke) as woke from staged s
