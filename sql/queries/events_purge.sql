-- events_purge: delete up to $1 expired events (expired on the DATABASE clock, the bus's one
-- clock); answers how many rows went. skip locked: two sweeps split the work.
-- $1 batch size
with doomed as (
  select e.id
    from x_job_events e
   where e.expires_at <= now()
   order by e.expires_at
   limit $1::int
     for update skip locked
),
gone as (delete from x_job_events e using doomed d where e.id = d.id returning 1)
select count(*) as removed from gone
