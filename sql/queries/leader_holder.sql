-- leader_holder: who holds the leader lease of key $1, and until when (a lapsed row included:
-- the caller compares expires_at_ms with its clock).
-- $1 key
select l.holder, x_ms(l.acquired_at) as acquired_at_ms, x_ms(l.expires_at) as expires_at_ms
  from x_job_leases l
 where l.key = $1::text and l.slot = 0
