-- enqueue_wake: announce queues that just gained rows due within 1 s (a COPY-ed batch,
-- enqueue_many_copy.sql, which cannot notify by itself), at most once per queue per 250 ms
-- slot, exactly like the wake arm of enqueue_many.sql: the slot row is read first and only
-- written when it moved. Runs after the COPY committed, so a woken worker finds the rows.
-- Answers the queues it announced.
-- $1 queues (distinct)  $2 wake slot
insert into x_job_wake_slots as w (queue, slot)
select q.queue, $2::bigint
  from unnest($1::text[]) as q(queue)
 where not exists (select 1 from x_job_wake_slots s where s.queue = q.queue and s.slot >= $2::bigint)
 order by q.queue
on conflict (queue) do update set slot = excluded.slot where w.slot < excluded.slot
returning pg_notify('x_jobs_wake', w.queue), w.queue
