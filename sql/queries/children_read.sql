-- children_read: the rows among $2 that are children of $1, as get_job.sql reads a row (their
-- results included): what a parent's wait decides on. An id that is not this parent's child
-- comes back as no row, so another tenant's job answers exactly as a missing one.
-- The ids are JOINED (unnest), never tested with `id = any($2)`: against the array, a generic
-- plan probes x_jobs_parent_idx (parent_id, created_at, id) and tests every entry of the
-- parent against the whole array, a thousand by a thousand (47 ms for a fan-in of 1,000;
-- 1 ms joined). tests/integration/test_postgres_children_plan.py holds it to that.
-- $1 parent id  $2 child ids
select j.id, j.run_id, j.name, j.queue, j.state, j.input::text as input, j.tenant_id,
       j.idempotency_key, j.attempt, j.max_attempts, x_ms(j.run_at) as run_at_ms,
       x_ms(j.created_at) as created_at_ms, x_ms(j.updated_at) as updated_at_ms,
       x_ms(j.finished_at) as finished_at_ms, j.claimed_by, j.claim,
       x_ms(j.lease_expires_at) as lease_expires_at_ms, j.last_error,
       j.progress::text as progress, j.traceparent, j.enqueued_by, j.priority, j.result::text as result,
       j.parent_id
  from (select distinct w.id from unnest($2::text[]) as w(id)) w
  join x_jobs j on j.id = w.id
 where j.parent_id = $1::text
