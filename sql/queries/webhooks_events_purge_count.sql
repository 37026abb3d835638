-- webhooks_events_purge_count: how many events a webhooks_events_purge pass would delete now
-- (the ledger rows a pass deletes first free more; a dry run counts what is free already).
-- No job row of the families may name the event, in any state (see webhooks_events_purge).
-- $1 cutoff ms  $2 the built-in webhook families' names
select count(*) as expired
  from x_webhook_events e
 where e.created_at < x_ts($1::bigint)
   and not exists (select 1 from x_webhook_deliveries d where d.event_id = e.id)
   and not exists (select 1 from x_jobs j
                    where j.name = any($2::text[])
                      and coalesce(j.tenant_id, '') = coalesce(e.tenant_id, '')
                      and j.input ? 'event_id'
                      and j.input ->> 'event_id' = e.id)
