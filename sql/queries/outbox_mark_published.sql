-- outbox_mark_published: retire a row AFTER its publish, fenced on the claimant: a late mark
-- from a relay whose lease lapsed would retire a row the new claimant has not published yet.
-- claimed_by stays as the audit of who published it. Answers the id when the mark landed.
-- $1 id  $2 claimant token  $3 now ms (the relay's clock)
update x_outbox
   set published_at = x_ts($3::bigint)
 where id = $1::text
   and claimed_by = $2::text
   and published_at is null
returning id
