-- backfill_finish: the pass ended (completed or failed); completed_at is when it ended.
-- $1 name  $2 run id  $3 status  $4 error  $5 now ms
update x_backfills b
   set status = $3::text, error = $4::text, completed_at = x_ts($5::bigint)
 where b.name = $1::text and b.run_id = $2::text
