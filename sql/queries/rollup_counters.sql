-- rollup_counters: one tier's pass. Buckets of width $1 that ended before $3 are folded into
-- buckets of width $2 (summed into the wider bucket that contains them) and deleted; with $2
-- null (the last tier) they are only deleted. Answers how many buckets left the tier; a second
-- run finds none, so it is idempotent.
-- $1 width ms  $2 next width ms (null: drop)  $3 cutoff ms
with folded as (
  delete from x_job_counters c
   where c.width_ms = $1::int and c.bucket_start_ms + c.width_ms <= $3::bigint
  returning c.*
),
merged as (
  insert into x_job_counters as c (job, width_ms, bucket_start_ms, done, retried, failed, dead,
                                   duration_ms)
  select f.job, $2::int, f.bucket_start_ms - f.bucket_start_ms % $2::int,
         sum(f.done), sum(f.retried), sum(f.failed), sum(f.dead), sum(f.duration_ms)
    from folded f
   where $2::int is not null
   group by 1, 2, 3
   order by 1, 3
  on conflict (job, width_ms, bucket_start_ms) do update
     set done = c.done + excluded.done,
         retried = c.retried + excluded.retried,
         failed = c.failed + excluded.failed,
         dead = c.dead + excluded.dead,
         duration_ms = c.duration_ms + excluded.duration_ms
)
select count(*) as folded from folded
