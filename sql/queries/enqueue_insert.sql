-- enqueue_insert: one job, the common case of enqueue.sql as a plain INSERT. The driver sends
-- it when the statement has no wake to announce (this process already announced the queue's
-- current 250 ms slot, or the row is due more than 1 s out): then enqueue.sql's found and woke
-- arms would do nothing, yet its CTEs cost time on every call (bench/RESULTS.md).
-- Dedupe is the same ON CONFLICT DO NOTHING over the primary key and the live-key index. When
-- nothing comes back the row was not inserted, and the driver sends enqueue.sql, which answers
-- the holder (deduped = true) or inserts after all if the holder finished in between.
-- $1 id  $2 run_id  $3 name  $4 queue  $5 input (json text)  $6 tenant_id  $7 idempotency_key
-- $8 max_attempts  $9 run_at ms  $10 now ms  $11 traceparent  $12 enqueued_by  $13 priority
-- $14 slot_key (the fleet slot's lease key, 0032; null: none or not known)
insert into x_jobs (id, run_id, name, queue, state, input, tenant_id, idempotency_key,
                    max_attempts, run_at, created_at, updated_at, traceparent, enqueued_by,
                    priority, slot_key)
values ($1::text, $2::text, $3::text, $4::text,
        case when $9::bigint > $10::bigint then 'delayed' else 'ready' end,
        $5::text::jsonb, $6::text, $7::text, $8::int,
        x_ts($9::bigint), x_ts($10::bigint), x_ts($10::bigint), $11::text, $12::text,
        $13::smallint, $14::text)
on conflict do nothing
returning id, run_id
