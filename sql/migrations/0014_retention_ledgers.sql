-- 0014: what x.purge needs to sweep the ledgers the webhooks added (0010) without a table scan.
-- x_webhook_events goes oldest first once no ledger row and no live delivery names it: the
-- sweep walks events by created_at and asks the ledger by event_id, one index each. The
-- deliveries ledger itself is swept along its primary key (seq grows with `at`), and
-- x_settlements (0013) along its own published_at index; neither needs another.
create index x_webhook_events_created_idx on x_webhook_events (created_at);
create index x_webhook_deliveries_event_idx on x_webhook_deliveries (event_id);
