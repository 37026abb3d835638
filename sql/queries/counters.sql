-- counters: one job's buckets (every tier) that end after $2, oldest first.
-- $1 job name  $2 since ms
select c.job, c.bucket_start_ms, c.width_ms, c.done, c.retried, c.failed, c.dead, c.duration_ms
  from x_job_counters c
 where c.job = $1::text
   and c.bucket_start_ms + c.width_ms > $2::bigint
 order by c.bucket_start_ms, c.width_ms
