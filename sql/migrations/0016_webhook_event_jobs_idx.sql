-- 0016: the webhook events sweep asks "does any delivery job, in any state, still name this
-- event" (a dead delivery outlives its event by 60 days, and retrying it must find the event).
-- The live dedupe index covers only live states, so the question gets its own index: partial
-- on the jobs whose input carries an event id (the webhook families'), keyed as it is asked.
create index x_jobs_webhook_event_idx on x_jobs ((input ->> 'event_id'), coalesce(tenant_id, ''))
  where input ? 'event_id';
