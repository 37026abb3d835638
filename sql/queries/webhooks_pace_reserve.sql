-- webhooks_pace_reserve: reserve an endpoint's next send slot, fleet-wide. The slot is the
-- later of now and the last reservation's end; the row then ends one gap (1 / rate) after it.
-- Answers how long to wait, in milliseconds (0 when the slot is now).
-- $1 endpoint id  $2 rate per second  $3 now ms
insert into x_webhook_pace as p (endpoint_id, next_at)
values ($1::text, x_ts($3::bigint) + make_interval(secs => 1.0 / $2::float8))
on conflict (endpoint_id) do update
   set next_at = greatest(p.next_at + make_interval(secs => 1.0 / $2::float8), excluded.next_at)
returning greatest(0, extract(epoch from p.next_at - x_ts($3::bigint)) * 1000 - 1000.0 / $2::float8)
          ::float8 as wait_ms
