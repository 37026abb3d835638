-- tokens_revoke: stamp a token revoked (a second revoke keeps the first stamp); answers its id,
-- or no row for an id no token has.
-- $1 id  $2 now ms
update x_api_tokens
   set revoked_at = coalesce(revoked_at, x_ts($2::bigint))
 where id = $1::text
returning id
