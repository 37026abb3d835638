-- leader_acquire: take or renew the leader lease — one row (slot 0) of x_job_leases under the
-- leader's key. The holder renews its own row (even one that lapsed, if nobody took it since);
-- another holder's row is taken only once it has lapsed. No row back: someone else leads.
-- A lease ROW with an expiry, never a session advisory lock: the executor is a pool.
-- $1 key  $2 holder  $3 now ms (null: the database clock)  $4 ttl ms
with clock as (select coalesce(x_ts($3::bigint), now()) as at)
insert into x_job_leases as l (key, slot, holder, acquired_at, expires_at)
select $1::text, 0, $2::text, c.at, c.at + $4::bigint * interval '1 millisecond'
  from clock c
on conflict (key, slot) do update
   set holder = excluded.holder,
       acquired_at = case when l.holder = excluded.holder then l.acquired_at
                          else excluded.acquired_at end,
       expires_at = excluded.expires_at
 where l.holder = excluded.holder or l.expires_at <= excluded.acquired_at
returning l.holder, x_ms(l.acquired_at) as acquired_at_ms, x_ms(l.expires_at) as expires_at_ms
