-- tokens_find: the token whose secret hashes to $1, revoked or expired ones included (the
-- caller says which refusal it is). One probe of x_api_tokens_hash_idx per request.
-- $1 sha-256 of the secret
select t.id, t.name, t.tenant_id, t.scopes, x_ms(t.created_at) as created_at_ms,
       x_ms(t.expires_at) as expires_at_ms, x_ms(t.revoked_at) as revoked_at_ms
  from x_api_tokens t
 where t.hash = $1::bytea
