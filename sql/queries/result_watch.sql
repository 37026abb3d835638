-- result_watch: a result wait marks the row (result_waited), so the statement that finishes
-- it (ack, a dead or failed nack, cancel) announces its id on `x_jobs_settled`, and reads the
-- row in the same statement. Only a live row is marked; a finished one is read as it is. The
-- mark and a settle take the row's lock in turn: whichever lands second sees the other (the
-- settle sees the mark and notifies, or the mark sees the finished state), so no settle slips
-- between the read and the wait.
-- The mark's row lock makes a claim that meets the row meanwhile skip it (SKIP LOCKED), and
-- that claim's worker, finding nothing, waits out its poll: a job enqueued and waited for at
-- once (`POST ...?wait=`, `handle.result()`) started up to the idle poll late. So a mark that
-- lands on a DUE row announces its queue on x_jobs_wake (delivered at commit, when the lock is
-- gone), and the driver tells this process's workers too (ujobs.drivers.postgres.results).
-- $1 id  $2 now ms
with marked as (
  update x_jobs j
     set result_waited = true
   where j.id = $1::text
     and j.state in ('ready', 'delayed', 'running', 'suspended')
     and j.result_waited is not true
  returning j.id
)
select j.id, j.run_id, j.name, j.queue, j.state, j.input::text as input, j.tenant_id,
       j.idempotency_key, j.attempt, j.max_attempts, x_ms(j.run_at) as run_at_ms,
       x_ms(j.created_at) as created_at_ms, x_ms(j.updated_at) as updated_at_ms,
       x_ms(j.finished_at) as finished_at_ms, j.claimed_by, j.claim,
       x_ms(j.lease_expires_at) as lease_expires_at_ms, j.last_error,
       j.progress::text as progress, j.traceparent, j.enqueued_by, j.priority,
       j.result::text as result, (select count(*) from marked) as marked,
       case when exists (select 1 from marked)
                 and j.state in ('ready', 'delayed', 'suspended')
                 and j.run_at <= x_ts($2::bigint)
            then pg_notify('x_jobs_wake', j.queue) is not null end as announced
  from x_jobs j
 where j.id = $1::text
