-- backfill_finish: the pass ended (completed or failed); completed_at is when it ended.
-- The pass is (name, tenant, run id), as backfill_progress.sql reads it.
-- $1 name  $2 run id  $3 status  $4 error  $5 now ms  $6 tenant (null: every tenant)
update x_backfills b
   set status = $3::text, error = $4::text, completed_at = x_ts($5::bigint)
 where b.name = $1::text and coalesce(b.tenant_id, '') = coalesce($6::text, '')
   and b.run_id = $2::text
