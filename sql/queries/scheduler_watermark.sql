-- scheduler_watermark: one task's watermark (no row: never armed). Read before a fire whose jobs
-- go through a job driver other than this database's: an occurrence the watermark already
-- passed is refused before anything is enqueued.
-- $1 task
select s.watermark_ms from x_scheduler_state s where s.task = $1::text
