-- event_find: live events of one name published at or after $2, oldest first, after the
-- (published_at, id) cursor $4/$5 when paging, that reach a waiter of tenant $7: events of
-- that tenant and events of none (an operator's); a waiter of no tenant ($7 NULL) sees only
-- the latter. $3 (json text) prefilters by containment; the bus applies the exact match in
-- Python.
-- $1 name  $2 since ms  $3 containment json text  $4 cursor ms  $5 cursor id  $6 limit
-- $7 waiter's tenant
select e.id, e.name, e.payload::text as payload, x_ms(e.published_at) as published_at_ms,
       x_ms(e.expires_at) as expires_at_ms, e.tenant_id
  from x_job_events e
 where e.name = $1::text
   and e.published_at >= x_ts($2::bigint)
   and e.expires_at > now()
   and (e.tenant_id is null or e.tenant_id = $7::text)
   and ($3::text is null or e.payload @> $3::text::jsonb)
   and ($4::bigint is null or (e.published_at, e.id) > (x_ts($4::bigint), $5::text))
 order by e.published_at, e.id
 limit $6::int
