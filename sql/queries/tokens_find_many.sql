-- tokens_find_many: tokens_find for several secrets at once (the api's concurrent requests share
-- one lookup); each row says which hash it answers.
-- $1 sha-256 of each secret
select t.hash, t.id, t.name, t.tenant_id, t.scopes, x_ms(t.created_at) as created_at_ms,
       x_ms(t.expires_at) as expires_at_ms, x_ms(t.revoked_at) as revoked_at_ms
  from x_api_tokens t
 where t.hash = any($1::bytea[])
