-- record_task_fire: the scheduler's record of a fire; an older occurrence never overwrites a
-- newer one.
-- $1 task  $2 occurrence ms  $3 now ms
insert into x_task_fires as f (task, occurrence_ms, fired_at_ms)
values ($1::text, $2::bigint, $3::bigint)
on conflict (task) do update
   set occurrence_ms = excluded.occurrence_ms, fired_at_ms = excluded.fired_at_ms
 where f.occurrence_ms <= excluded.occurrence_ms
