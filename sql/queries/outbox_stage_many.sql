-- outbox_stage_many: N staged enqueues in one statement, on the CALLER's connection (see
-- outbox_stage for the ids and the wake; one notification covers the whole batch).
-- $1..$8, $10, $11 arrays, one element per row  $9 run_at ms array (nulls allowed)
-- $12 staged_at ms  $13 priority array
with staged as (
  insert into x_outbox (id, run_id, name, queue, input, tenant_id, idempotency_key,
                        max_attempts, run_at, traceparent, enqueued_by, staged_at, priority)
  select r.id, r.run_id, r.name, r.queue, r.input::jsonb, r.tenant_id, r.idempotency_key,
         r.max_attempts, x_ts(r.run_at_ms), r.traceparent, r.enqueued_by, x_ts($12::bigint),
         r.priority
    from unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
                $7::text[], $8::int[], $9::bigint[], $10::text[], $11::text[], $13::smallint[])
         as r(id, run_id, name, queue, input, tenant_id, idempotency_key, max_attempts,
              run_at_ms, traceparent, enqueued_by, priority)
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
