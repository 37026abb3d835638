-- 0034: a backfill pass is keyed by its tenant too: (name, coalesce(tenant_id, ''), run_id)
-- instead of (name, run_id). A run id is chosen by the caller, so two tenants' passes of one
-- per-tenant backfill could name the same run id; keyed without the tenant, the second pass
-- adopted the first one's row (its tenant unchanged) and its progress and ending were written
-- there: tenant B could mark tenant A's pass completed, and A's next pass was then skipped as
-- already done. As x_job_steps (0017), a run id is a namespace of its tenant; the pass over
-- every tenant keeps '' (tenant_id null). A unique index replaces the primary key (a primary
-- key cannot hold the coalesce); backfill_begin.sql names it as its conflict arbiter. The
-- ledger is small (one row per pass), so building the index inside the migration's
-- transaction is brief.
alter table x_backfills drop constraint x_backfills_pkey;
create unique index x_backfills_pass_key on x_backfills (name, (coalesce(tenant_id, '')), run_id);
