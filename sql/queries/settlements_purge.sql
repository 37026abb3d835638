-- settlements_purge: delete up to $2 settlements published before $1 (the stream holds them
-- from then on); pending ones are never purged.
-- $1 cutoff ms  $2 limit
with doomed as (
  select seq from x_settlements
   where published_at is not null and published_at < x_ts($1::bigint)
   order by published_at
   limit $2::int
)
delete from x_settlements s using doomed d where s.seq = d.seq
