-- 0005: the running rows' index keys on (queue, lease_expires_at), so the claim's lapsed-lease
-- arm reads only rows whose lease has lapsed, not every running row of the queue.
-- With (queue) alone that arm walked all of a queue's running rows on every claim and
-- filtered them on lease_expires_at: a 16-row claim took 1.31 / 1.90 / 4.61 ms with
-- 0 / 2,000 / 10,000 other rows running (sql/README.md). The price: a heartbeat moves
-- lease_expires_at, now an indexed column, so it is no longer a HOT update; it adds one entry
-- to each index whose predicate a running row meets (measured in sql/README.md). The scaler's
-- running count reads the same index by its queue prefix.
-- Like every migration this runs in one transaction (no CONCURRENTLY): the build reads the
-- whole table and holds off writes to x_jobs until it ends, seconds per few million rows.
-- Apply it in a quiet moment.
create index x_jobs_running_lease_idx on x_jobs (queue, lease_expires_at)
  where state = 'running';
drop index x_jobs_running_idx;
