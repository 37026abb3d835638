-- scheduler_advance: move a task's watermark forward without firing (arming a task). Never
-- moves it back, so a late arm cannot undo a fire another scheduler already made.
-- $1 task  $2 watermark ms  $3 now ms
insert into x_scheduler_state as s (task, watermark_ms, updated_at)
values ($1::text, $2::bigint, x_ts($3::bigint))
on conflict (task) do update
   set watermark_ms = excluded.watermark_ms, updated_at = excluded.updated_at
 where s.watermark_ms < excluded.watermark_ms
