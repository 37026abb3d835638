-- tokens_list: every token, newest first (never a hash).
select t.id, t.name, t.tenant_id, t.scopes, x_ms(t.created_at) as created_at_ms,
       x_ms(t.expires_at) as expires_at_ms, x_ms(t.revoked_at) as revoked_at_ms
  from x_api_tokens t
 order by t.created_at desc, t.id desc
