-- jobs_purge_leases: up to $2 fleet-lease rows whose TTL lapsed before $1 (the caller's clock).
-- A lapsed slot is free to any acquirer already (lease_acquire takes it over), so the row is
-- only a left-over of a run that ended or a worker that died. skip locked.
-- $1 now ms  $2 limit
with doomed as (
  select l.key, l.slot
    from x_job_leases l
   where l.expires_at < x_ts($1::bigint)
   limit $2::int
     for update skip locked
),
gone as (
  delete from x_job_leases l using doomed d
   where l.key = d.key and l.slot = d.slot
  returning 1
)
select count(*) as deleted from gone
