-- scheduler_fired: the second half of a fire whose jobs went through a job driver other than this
-- database's (Redis): they are enqueued, now the watermark moves — only while it is still BEFORE
-- the occurrence, so a scheduler that raced this one here moves nothing (fired = false; its jobs
-- carried the same derived ids, so they were a dedupe). With $5, the fire is recorded in
-- x_task_fires in the same statement (a driver with no operator surface has nowhere else).
-- $1 task  $2 occurrence ms  $3 new watermark ms (>= $2)  $4 now ms  $5 record the fire here
with moved as (
  insert into x_scheduler_state as s (task, watermark_ms, updated_at)
  values ($1::text, $3::bigint, x_ts($4::bigint))
  on conflict (task) do update
     set watermark_ms = excluded.watermark_ms, updated_at = excluded.updated_at
   where s.watermark_ms < $2::bigint
  returning s.task
),
recorded as (
  insert into x_task_fires as f (task, occurrence_ms, fired_at_ms)
  select $1::text, $2::bigint, $4::bigint where $5::boolean and exists (select 1 from moved)
  on conflict (task) do update
     set occurrence_ms = excluded.occurrence_ms, fired_at_ms = excluded.fired_at_ms
   where f.occurrence_ms <= excluded.occurrence_ms
  returning f.task
)
select exists (select 1 from moved) as fired, (select count(*) from recorded) as recorded
