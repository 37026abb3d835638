-- outbox_lag: the relay's backlog for its metrics - committed rows not yet published, and how
-- long the oldest has waited (seconds on the database clock; 0 when nothing waits).
select count(*) as pending,
       coalesce(extract(epoch from now() - min(staged_at)), 0)::float8 as lag_s
from x_outbox
where published_at is null
