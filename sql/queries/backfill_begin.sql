-- backfill_begin: adopt this run's ledger row (a retry keeps its started_at) or start one.
-- The tenant is the pass's scope (null for a pass over every tenant), and a pass is keyed by
-- it (x_backfills_pass_key, 0034): another tenant's pass under the same run id is a row of its
-- own, never this one.
-- $1 name  $2 run id  $3 checksum  $4 app version  $5 now ms  $6 tenant
insert into x_backfills as b (name, run_id, checksum, status, app_version, started_at, tenant_id)
values ($1::text, $2::text, $3::text, 'running', $4::text, x_ts($5::bigint), $6::text)
on conflict (name, (coalesce(tenant_id, '')), run_id) do update
   set status = 'running', checksum = excluded.checksum, app_version = excluded.app_version,
       completed_at = null, error = null
returning b.name, b.run_id, b.checksum, b.status, b.app_version, b.rows_processed,
       b.last_cursor::text as last_cursor, x_ms(b.started_at) as started_at_ms,
       x_ms(b.completed_at) as completed_at_ms, b.error, b.tenant_id
