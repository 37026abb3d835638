-- worker_beat: upsert this worker's registry row, expiring $9 ms from now. The first beat
-- with draining stamps draining_at and no later beat moves it. Rows of workers that stopped
-- beating are deleted once expired.
-- $1 id  $2 host  $3 pid  $4 started ms  $5 queues  $6 slots  $7 in-flight job ids
-- $8 now ms  $9 ttl ms  $10 draining
with expired as (
  delete from x_job_workers w
   where w.expires_at <= x_ts($8::bigint) and w.id <> $1::text
  returning 1
)
insert into x_job_workers as w (id, host, pid, started_at, queues, slots, in_flight,
                                last_heartbeat_at, expires_at, draining_at)
values ($1::text, $2::text, $3::int, x_ts($4::bigint), $5::text[], $6::int, $7::text[],
        x_ts($8::bigint), x_ts($8::bigint + $9::bigint),
        case when $10::bool then x_ts($8::bigint) end)
on conflict (id) do update
   set host = excluded.host,
       pid = excluded.pid,
       started_at = excluded.started_at,
       queues = excluded.queues,
       slots = excluded.slots,
       in_flight = excluded.in_flight,
       last_heartbeat_at = excluded.last_heartbeat_at,
       expires_at = excluded.expires_at,
       draining_at = coalesce(w.draining_at, excluded.draining_at)
