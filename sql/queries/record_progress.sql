-- record_progress: what run.progress() reports, only while the row runs under this claim.
-- progress is not indexed, so this is a HOT update. The driver throttles it per run.
-- $1 id  $2 worker id  $3 claim  $4 progress json text  $5 now ms
update x_jobs j
   set progress = $4::text::jsonb, updated_at = x_ts($5::bigint)
 where j.id = $1::text
   and j.claimed_by = $2::text
   and j.claim = $3::int
   and j.state = 'running'
returning j.id
