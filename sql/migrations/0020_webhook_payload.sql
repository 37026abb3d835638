-- 0020: what a standard-scheme delivery's body is, per endpoint. 'envelope' is the Standard
-- Webhooks payload convention, {"type": <topic>, "timestamp": <ISO 8601>, "data": <the
-- published JSON>}, so a partner tells topics apart; 'raw' is the published bytes as they are.
--
-- Every endpoint registered before this migration received the raw bytes and its partner
-- parses them so: the column is added with 'raw' (which fills the existing rows), and only
-- then does its default become 'envelope', for the rows registered from now on.
alter table x_webhook_endpoints
  add column payload text not null default 'raw' check (payload in ('raw', 'envelope'));
alter table x_webhook_endpoints alter column payload set default 'envelope';
