-- task_fires: per task, the last occurrence that dispatched, by task name.
-- $1 limit
select f.task, f.occurrence_ms, f.fired_at_ms from x_task_fires f order by f.task limit $1::int
