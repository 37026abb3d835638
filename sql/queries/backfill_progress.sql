-- backfill_progress: rows processed so far by this pass and the cursor it reached. The pass is
-- (name, tenant, run id): another tenant's pass under the same run id is not touched.
-- $1 name  $2 run id  $3 rows  $4 cursor json text  $5 tenant (null: the pass over every tenant)
update x_backfills b
   set rows_processed = $3::bigint, last_cursor = $4::text::jsonb
 where b.name = $1::text and coalesce(b.tenant_id, '') = coalesce($5::text, '')
   and b.run_id = $2::text
