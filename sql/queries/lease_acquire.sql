-- lease_acquire: hold slots for a batch of requests whose keys are all different, in one
-- statement (one commit for every slot a busy worker takes at once). Per request: a holder
-- that already holds a slot of its key renews it (held); otherwise it takes the lowest slot
-- that is free or whose holder's TTL lapsed (a SIGKILLed worker's slot frees itself), provided
-- fewer than its limit of holders are live. When two acquirers race for one slot the loser
-- gets held = false with tried = true, and the store asks again (the next free slot).
-- $1 keys (distinct)  $2 holders  $3 limits  $4 now ms  $5 ttl ms (per request)
with req as (
  select r.key, r.holder, r.lim, r.ttl
    from unnest($1::text[], $2::text[], $3::int[], $5::bigint[]) as r(key, holder, lim, ttl)
),
mine as (
  update x_job_leases l
     set expires_at = x_ts($4::bigint + r.ttl)
    from req r
   where l.key = r.key and l.holder = r.holder
  returning l.key
),
free as (
  select r.key, r.holder, r.ttl, f.slot
    from req r
   cross join lateral (
     select s.slot
       from generate_series(0, r.lim - 1) as s(slot)
      where not exists (select 1 from mine m where m.key = r.key)
        and (select count(*) from x_job_leases l
              where l.key = r.key and l.expires_at > x_ts($4::bigint)) < r.lim
        and not exists (select 1 from x_job_leases l
                         where l.key = r.key and l.slot = s.slot
                           and l.expires_at > x_ts($4::bigint))
      order by s.slot
      limit 1
   ) f
),
taken as (
  insert into x_job_leases as l (key, slot, holder, acquired_at, expires_at)
  select f.key, f.slot, f.holder, x_ts($4::bigint), x_ts($4::bigint + f.ttl) from free f
   order by f.key
  on conflict (key, slot) do update
     set holder = excluded.holder, acquired_at = excluded.acquired_at,
         expires_at = excluded.expires_at
   where l.expires_at <= x_ts($4::bigint)
  returning l.key
)
select r.key,
       exists (select 1 from mine m where m.key = r.key)
         or exists (select 1 from taken t where t.key = r.key) as held,
       exists (select 1 from free f where f.key = r.key) as tried
  from req r
