-- outbox_purge_count: how many published x_outbox rows an outbox_purge pass would delete.
-- $1 cutoff ms
select count(*) as expired
  from x_outbox o
 where o.published_at is not null
   and o.published_at < x_ts($1::bigint)
