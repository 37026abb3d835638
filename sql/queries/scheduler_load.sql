-- scheduler_load: every task's watermark — read when a scheduler gains leadership and after a
-- fire it lost to another scheduler; never on an idle round.
select s.task, s.watermark_ms from x_scheduler_state s order by s.task
