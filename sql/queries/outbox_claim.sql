-- outbox_claim: a CLAIM, not a read. Locks up to $2 unpublished rows whose claim is absent or
-- lapsed (claimed_at older than the lease), in (staged_at, id) order - total, so two relays
-- compose the same batch in the same order - and stamps claimed_at/claimed_by in the SAME
-- statement. The stamp is the lease: for update skip locked alone holds its locks only until
-- this statement ends, after which a second relay would read (and publish) the same rows.
-- A row another claim stamped after this statement's snapshot is re-checked under its lock
-- and dropped, so one committed row is never held by two claimants inside its lease.
-- The update finds its rows through the primary key (`id = any(array(...))`), as the job claim
-- does: joined to `picked`, a generic plan (the relay's pool forces them) guesses a tenth of
-- the table for `limit $2` and hash-joins a sequential scan of the whole outbox on every pass.
-- $1 claimant token  $2 limit  $3 now ms  $4 lease ms
with picked as (
  select o.id
    from x_outbox o
   where o.published_at is null
     and (o.claimed_at is null or o.claimed_at <= x_ts($3::bigint - $4::bigint))
   order by o.staged_at, o.id
   limit $2::int
     for update skip locked
),
claimed as (
  update x_outbox o
     set claimed_at = x_ts($3::bigint), claimed_by = $1::text
   where o.id = any(array(select p.id from picked p))
  returning o.id, o.run_id, o.name, o.queue, o.input::text as input, o.tenant_id,
            o.idempotency_key, o.max_attempts, x_ms(o.run_at) as run_at_ms, o.traceparent,
            o.enqueued_by, o.staged_at, x_ms(o.staged_at) as staged_at_ms, o.claimed_by,
            o.priority
)
select c.id, c.run_id, c.name, c.queue, c.input, c.tenant_id, c.idempotency_key,
       c.max_attempts, c.run_at_ms, c.traceparent, c.enqueued_by, c.staged_at_ms, c.claimed_by,
       c.priority
  from claimed c
 order by c.staged_at, c.id
