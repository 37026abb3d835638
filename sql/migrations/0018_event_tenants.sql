-- 0018: an event carries the tenant of whoever published it. A tenant token's event reaches
-- only that tenant's waiters (a wait_for_event of a job of that tenant); NULL (an operator's
-- token, an operator's script, a tenant='none' job) reaches every waiter. Existing events were
-- published before tenants were recorded: they keep NULL, as they matched every waiter before.
alter table x_job_events add column tenant_id text collate "C";
