-- enqueue_insert_live: enqueue_insert.sql for the api, in ONE statement with the check that the
-- calling token is live (not revoked, not expired at $10): the row is inserted only when it is.
-- The api caches a token's immutable facts (id, tenant, scopes, expiry) and leaves the one fact
-- that changes, revocation, to this statement, so a revoke committed before the request's
-- statement started refuses it (live = false, nothing inserted) with no lookup of its own.
-- Answers one row always: live, and the new row's ids (null when a live key or the id
-- already holds it: the driver then sends enqueue.sql, which answers the holder).
-- $1..$12 as enqueue_insert.sql  $13 token id  $14 priority
with live as (
  select exists (
    select 1 from x_api_tokens t
     where t.id = $13::text
       and t.revoked_at is null
       and (t.expires_at is null or t.expires_at > x_ts($10::bigint))
  ) as ok
),
inserted as (
  insert into x_jobs (id, run_id, name, queue, state, input, tenant_id, idempotency_key,
                      max_attempts, run_at, created_at, updated_at, traceparent, enqueued_by,
                      priority)
  select $1::text, $2::text, $3::text, $4::text,
         case when $9::bigint > $10::bigint then 'delayed' else 'ready' end,
         $5::text::jsonb, $6::text, $7::text, $8::int,
         x_ts($9::bigint), x_ts($10::bigint), x_ts($10::bigint), $11::text, $12::text,
         $14::smallint
    from live
   where live.ok
  on conflict do nothing
  returning id, run_id
)
select l.ok as live, i.id, i.run_id from live l left join inserted i on true
