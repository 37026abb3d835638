-- webhooks_events_purge: delete up to $2 x_webhook_events stored before $1 (now minus the
-- retention, on the caller's clock), oldest first, that nothing can still send: no ledger row
-- names the event (a failed attempt is what `ujobs webhooks redeliver` reads it back from) and
-- no job row of the built-in families $3 carries it, whatever its state (a delivery not yet
-- made reads the event's bytes on its next attempt, and a dead one an operator retries reads
-- them too; dead jobs outlive events, so the jobs target deleting the row frees the event).
-- The `?` clause is the partial index x_jobs_webhook_event_idx's predicate (0016).
-- $1 cutoff ms  $2 batch size  $3 the built-in webhook families' names
with doomed as (
  select e.id
    from x_webhook_events e
   where e.created_at < x_ts($1::bigint)
     and not exists (select 1 from x_webhook_deliveries d where d.event_id = e.id)
     and not exists (select 1 from x_jobs j
                      where j.name = any($3::text[])
                        and coalesce(j.tenant_id, '') = coalesce(e.tenant_id, '')
                        and j.input ? 'event_id'
                        and j.input ->> 'event_id' = e.id)
   order by e.created_at
   limit $2::int
     for update of e skip locked
),
deleted as (
  delete from x_webhook_events e where e.id = any(array(select id from doomed))
  returning e.id
)
select count(*) as deleted from deleted
