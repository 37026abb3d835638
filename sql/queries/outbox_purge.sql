-- outbox_purge: delete up to $2 PUBLISHED rows whose published_at is older than $1 (now minus
-- the retention, on the caller's clock). An unpublished row is a job not yet handed over and
-- is never deleted. skip locked: two sweeps split the work instead of waiting on each other.
-- $1 cutoff ms  $2 batch size
with doomed as (
  select o.id
    from x_outbox o
   where o.published_at is not null
     and o.published_at < x_ts($1::bigint)
   order by o.published_at
   limit $2::int
     for update skip locked
),
deleted as (
  delete from x_outbox o using doomed d where o.id = d.id returning o.id
)
select count(*) as deleted from deleted
