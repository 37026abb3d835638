-- webhooks_endpoint_list: the endpoints of one tenant (or of every tenant when $1 is null),
-- with their topics; never a secret, and of their own headers the names only.
-- $1 tenant or null  $2 now ms
select e.id, e.tenant_id, e.url, e.scheme, e.payload, e.description,
       array(select k from jsonb_object_keys(e.headers) k order by k collate "C") as header_names,
       e.rate_per_s, x_ms(e.disabled_at) as disabled_at_ms, e.disabled_reason, e.consecutive_failures,
       e.previous_expires_at > x_ts($2::bigint) as rotating,
       coalesce((select array_agg(s.topic order by s.topic) from x_webhook_subscriptions s
                  where s.endpoint_id = e.id), '{}') as topics,
       x_ms(e.created_at) as created_at_ms
  from x_webhook_endpoints e
 where $1::text is null or e.tenant_id = $1::text
 order by e.id
