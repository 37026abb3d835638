-- backfill_list: the ledger, newest pass first, optionally one name and/or one status.
-- $1 name  $2 status  $3 limit
select b.name, b.run_id, b.checksum, b.status, b.app_version, b.rows_processed,
       b.last_cursor::text as last_cursor, x_ms(b.started_at) as started_at_ms,
       x_ms(b.completed_at) as completed_at_ms, b.error, b.tenant_id
  from x_backfills b
 where ($1::text is null or b.name = $1::text)
   and ($2::text is null or b.status = $2::text)
 order by b.started_at desc, b.name, b.run_id
 limit $3::int
