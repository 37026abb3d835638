-- lease_acquire: hold one of the $3 slots of key $1 for $5 ms. A holder that already holds a
-- slot renews it (true). Otherwise it takes the lowest slot that is free or whose holder's TTL
-- lapsed (a SIGKILLed worker's slot frees itself), provided fewer than $3 holders are live.
-- When two acquirers race for one slot the loser gets held = false with tried = true, and the
-- store asks again (the next free slot).
-- $1 key  $2 holder  $3 limit  $4 now ms  $5 ttl ms
with mine as (
  update x_job_leases l
     set expires_at = x_ts($4::bigint + $5::bigint)
   where l.key = $1::text and l.holder = $2::text
  returning l.slot
),
free as (
  select s.slot
    from generate_series(0, $3::int - 1) as s(slot)
   where not exists (select 1 from mine)
     and (select count(*) from x_job_leases l
           where l.key = $1::text and l.expires_at > x_ts($4::bigint)) < $3::int
     and not exists (select 1 from x_job_leases l
                      where l.key = $1::text and l.slot = s.slot
                        and l.expires_at > x_ts($4::bigint))
   order by s.slot
   limit 1
),
taken as (
  insert into x_job_leases as l (key, slot, holder, acquired_at, expires_at)
  select $1::text, f.slot, $2::text, x_ts($4::bigint), x_ts($4::bigint + $5::bigint) from free f
  on conflict (key, slot) do update
     set holder = excluded.holder, acquired_at = excluded.acquired_at,
         expires_at = excluded.expires_at
   where l.expires_at <= x_ts($4::bigint)
  returning l.slot
)
select exists (select 1 from mine) or exists (select 1 from taken) as held,
       exists (select 1 from free) as tried
