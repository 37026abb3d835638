-- pause: a row the claim (kind 'queue') or the scheduler (kind 'task') reads. Idempotent.
-- $1 kind  $2 name  $3 now ms
insert into x_job_pauses (kind, name, paused_at)
values ($1::text, $2::text, x_ts($3::bigint))
on conflict (kind, name) do nothing
