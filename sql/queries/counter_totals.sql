-- counter_totals: per job, the sums of its buckets that end after $1.
-- $1 since ms
select c.job, sum(c.done)::bigint as done, sum(c.retried)::bigint as retried,
       sum(c.failed)::bigint as failed, sum(c.dead)::bigint as dead,
       sum(c.duration_ms)::bigint as duration_ms
  from x_job_counters c
 where c.bucket_start_ms + c.width_ms > $1::bigint
 group by c.job
 order by c.job
