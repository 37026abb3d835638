-- unique_for_holder: after enqueue_controlled.sql inserted a unique_for row, in the same
-- transaction and with a fresh snapshot: the newest done unique_for run of the key that finished
-- within the period, other than the row just inserted (x_jobs_unique_done_idx). One is found
-- only when the key's live holder was acked while the insert ran (after its snapshot, so seen
-- neither live nor done there): the driver rolls the insert back and answers this run, deduped.
-- $1 name  $2 tenant  $3 key  $4 now ms  $5 unique_for ms  $6 the inserted id
select j.id, j.run_id
  from x_jobs j
 where j.name = $1::text
   and coalesce(j.tenant_id, '') = coalesce($2::text, '')
   and j.idempotency_key = $3::text
   and j.state = 'done'
   and j.unique_for_ms is not null
   and j.finished_at > x_ts($4::bigint - $5::bigint)
   and j.id <> $6::text
 order by j.finished_at desc
 limit 1
