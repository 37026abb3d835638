-- 0009_tokens: the api's bearer tokens (DESIGN.md "Tokens and tenancy"). Only a SHA-256 of the
-- secret is stored: a token is 32 random bytes, so a fast hash is as strong as a slow one and
-- the lookup stays one index probe per request. A token belongs to one tenant, or to none
-- when it is an operator token; revoking stamps revoked_at and the next request reads it.
create table x_api_tokens (
  id          text        primary key,
  name        text,
  tenant_id   text,
  operator    boolean     not null,
  scopes      text[]      not null,
  hash        bytea       not null,
  created_at  timestamptz not null,
  expires_at  timestamptz,
  revoked_at  timestamptz,
  constraint x_api_tokens_owner_check check (operator = (tenant_id is null))
);

create unique index x_api_tokens_hash_idx on x_api_tokens (hash);
