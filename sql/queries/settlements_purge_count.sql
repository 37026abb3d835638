-- settlements_purge_count: how many published settlements a settlements_purge pass would delete.
-- $1 cutoff ms
select count(*) as expired
  from x_settlements s
 where s.published_at is not null
   and s.published_at < x_ts($1::bigint)
