-- lease_renew: extend a slot this holder still holds (not lapsed). False: it was lost.
-- $1 key  $2 holder  $3 now ms  $4 ttl ms
update x_job_leases l
   set expires_at = x_ts($3::bigint + $4::bigint)
 where l.key = $1::text and l.holder = $2::text and l.expires_at > x_ts($3::bigint)
returning l.slot
