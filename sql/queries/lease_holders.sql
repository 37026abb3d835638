-- lease_holders: the live holders of one key, in slot order.
-- $1 key  $2 now ms
select l.holder
  from x_job_leases l
 where l.key = $1::text and l.expires_at > x_ts($2::bigint)
 order by l.slot
