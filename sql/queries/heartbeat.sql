-- heartbeat: extend the lease of a row still running under this claim. lease_expires_at is
-- keyed in x_jobs_running_lease_idx (what keeps the claim's lapsed-lease arm off the live
-- leases), so this is not a HOT update: it adds an entry to each index the running row is in
-- (sql/README.md weighs the two). Answers 'renewed', 'cancelled' (an operator cancelled the
-- run under this claim) or 'lost' (another claim holds it, it settled, or it is gone).
-- $1 id  $2 worker id  $3 claim  $4 now ms  $5 visibility ms
with renewed as (
  update x_jobs j
     set lease_expires_at = x_ts($4::bigint + $5::bigint),
         updated_at = x_ts($4::bigint)
   where j.id = $1::text
     and j.claimed_by = $2::text
     and j.claim = $3::int
     and j.state = 'running'
  returning 1
)
select case
         when exists (select 1 from renewed) then 'renewed'
         when exists (select 1 from x_jobs j
                       where j.id = $1::text and j.state = 'cancelled'
                         and j.claimed_by = $2::text and j.claim = $3::int) then 'cancelled'
         else 'lost'
       end as result
