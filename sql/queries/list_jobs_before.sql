-- list_jobs_before: the page NEWER than the `before` cursor: the rows nearest the cursor,
-- read oldest first here and reversed by the driver, so the page is still newest first.
-- $1..$7 as list_jobs  $8 cursor created_at ms  $9 cursor id  $10 limit
select j.id, j.run_id, j.name, j.queue, j.state, j.input::text as input, j.tenant_id,
       j.idempotency_key, j.attempt, j.max_attempts, x_ms(j.run_at) as run_at_ms,
       x_ms(j.created_at) as created_at_ms, x_ms(j.updated_at) as updated_at_ms,
       x_ms(j.finished_at) as finished_at_ms, j.claimed_by, j.claim,
       x_ms(j.lease_expires_at) as lease_expires_at_ms, j.last_error,
       j.progress::text as progress, j.traceparent, j.enqueued_by, j.priority
  from x_jobs j
 where ($1::text is null or j.queue = $1::text)
   and ($2::text is null or j.name = $2::text)
   and ($3::text is null or j.state = $3::text)
   and ($4::text is null or j.tenant_id = $4::text)
   and ($5::text is null or starts_with(lower(j.id), lower($5::text)))
   and ($6::bigint is null or j.created_at >= x_ts($6::bigint))
   and ($7::bigint is null or j.created_at <= x_ts($7::bigint))
   and (j.created_at, j.id) > (x_ts($8::bigint), $9::text)
 order by j.created_at, j.id
 limit $10::int
