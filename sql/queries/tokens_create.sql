-- tokens_create: store one token (its hash, never the secret).
-- $1 id  $2 name  $3 tenant_id (null: operator)  $4 scopes  $5 sha-256 of the secret
-- $6 now ms  $7 expires at ms (null: never)
insert into x_api_tokens (id, name, tenant_id, operator, scopes, hash, created_at, expires_at)
values ($1::text, $2::text, $3::text, $3::text is null, $4::text[], $5::bytea,
        x_ts($6::bigint), x_ts($7::bigint))
