-- settlements_pending: how many settlements wait for the relay, and the oldest one's age
-- (ujobs nats status).
select count(*) as pending,
       (extract(epoch from min(settled_at)) * 1000)::bigint as oldest_ms
  from x_settlements where published_at is null
