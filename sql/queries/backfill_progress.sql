-- backfill_progress: rows processed so far by this pass and the cursor it reached.
-- $1 name  $2 run id  $3 rows  $4 cursor json text
update x_backfills b
   set rows_processed = $3::bigint, last_cursor = $4::text::jsonb
 where b.name = $1::text and b.run_id = $2::text
