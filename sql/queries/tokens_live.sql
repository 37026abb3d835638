-- tokens_live: which of these token ids are live at $2 (not revoked, not expired). The api's
-- group commit sends it once for a coalesced group of single enqueues, just before the group's
-- statement, so a token revoked before then queues nothing (enqueue_insert_live.sql is the
-- same check for a request sent alone).
-- $1 token ids  $2 now ms
select t.id
  from x_api_tokens t
 where t.id = any($1::text[])
   and t.revoked_at is null
   and (t.expires_at is null or t.expires_at > x_ts($2::bigint))
