-- backfill_latest_completed: the newest completed pass of one backfill in one scope: the same
-- tenant, or (null) the pass over every tenant.
-- $1 name  $2 tenant
select b.name, b.run_id, b.checksum, b.status, b.app_version, b.rows_processed,
       b.last_cursor::text as last_cursor, x_ms(b.started_at) as started_at_ms,
       x_ms(b.completed_at) as completed_at_ms, b.error, b.tenant_id
  from x_backfills b
 where b.name = $1::text and b.status = 'completed' and b.tenant_id is not distinct from $2::text
 order by b.completed_at desc, b.started_at desc
 limit 1
