-- outbox_release: hand claimed rows back at once (a failed publish stopped the batch), fenced
-- on the claimant: a relay that stalled past its lease owns nothing, and its late release must
-- not unclaim rows the relay that reclaimed them is publishing. Answers the rows released.
-- $1 ids  $2 claimant token
with released as (
  update x_outbox
     set claimed_at = null, claimed_by = null
   where id = any($1::text[])
     and claimed_by = $2::text
     and published_at is null
  returning id
)
select count(*) as released from released
