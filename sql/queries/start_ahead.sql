-- start_ahead: rows claimed ahead (0006) start: clear their `ahead` mark, so from here a
-- lapsed lease counts their attempt. Up to N rows in one statement (the driver coalesces the
-- starts that arrive while one is in flight), each fenced on its claim and on state =
-- 'running' exactly as ack.sql is, looking its fence up in the batch: one JSON object
-- {id: {claim: {worker id: 1}}}. 'running' comes as $3 for the reason ack.sql gives.
-- $1 ids  $2 the batch (json text)  $3 'running'
with batch as materialized (select $2::text::jsonb as b)
update x_jobs j
   set ahead = false
 where j.id = any($1::text[])
   and j.state = $3::text
   and (select b from batch) #> array[j.id, j.claim::text, j.claimed_by] is not null
returning j.id, j.claimed_by, j.claim
