-- settlements_purge: delete up to $2 x_settlements rows PUBLISHED before $1 (now minus the
-- retention, on the caller's clock; UJOBS_SETTLED holds them from then on), oldest first along
-- x_settlements_published_idx. A pending row is a settlement not yet on the stream and is never
-- deleted. skip locked: a sweep never waits on the relay's batch, nor the relay on a sweep.
-- $1 cutoff ms  $2 batch size
with doomed as (
  select s.seq
    from x_settlements s
   where s.published_at is not null
     and s.published_at < x_ts($1::bigint)
   order by s.published_at
   limit $2::int
     for update of s skip locked
),
deleted as (
  delete from x_settlements s where s.seq = any(array(select seq from doomed))
  returning s.seq
)
select count(*) as deleted from deleted
