-- 0014: the backfill ledger records the tenant a pass swept, and x.purge gets the indexes it
-- needs to sweep the ledgers the webhooks added (0010) without a table scan.
--
-- x_backfills.tenant_id: the org a `tenant=lambda i: ...` pass was scoped to (null: a
-- `tenant="none"` pass, which sweeps every tenant, or a pass from before this migration). A
-- completed row blocks a pass of the same scope only, so one org's completed sweep no longer
-- turns another org's pass into a no-op; rows written before 0014 block only the unscoped pass
-- (a re-run of a scoped one is the at-least-once the spec already asks `handle` to tolerate).
alter table x_backfills add column tenant_id text collate "C";
--
-- x_webhook_events goes oldest first once no ledger row and no live delivery names it: the
-- sweep walks events by created_at and asks the ledger by event_id, one index each. The
-- deliveries ledger itself is swept along its primary key (seq grows with `at`), and
-- x_settlements (0013) along its own published_at index; neither needs another.
create index x_webhook_events_created_idx on x_webhook_events (created_at);
create index x_webhook_deliveries_event_idx on x_webhook_deliveries (event_id);
