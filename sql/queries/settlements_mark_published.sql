-- settlements_mark_published: stamp the settlements the relay's publish acks covered.
-- $1 seqs  $2 now ms
update x_settlements set published_at = x_ts($2::bigint)
 where seq = any($1::bigint[]) and published_at is null
