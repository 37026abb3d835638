-- enqueue_many_copy: the common case of enqueue_many.sql as a COPY: a batch none of whose ids
-- or live keys is taken. The driver sends it first (shared/drivers/postgres_copy.py encodes
-- the rows in COPY's text format, state and times already resolved against one clock read,
-- as enqueue_many.sql would). COPY is one statement, all or nothing: a unique violation (an
-- id that names a row, or a live key another row holds: the primary key or
-- x_jobs_name_tenant_idempotency_live_idx) inserts nothing, and the driver sends
-- enqueue_many.sql, which dedupes row by row and answers the holders; any other error sends
-- enqueue_many.sql too, which inserts or raises its own error. Dedupe is the same unique
-- indexes either way. What this saves: ON CONFLICT's speculative insertion (an arbiter
-- pre-check of both unique indexes and a confirm record per row), the jsonb_to_recordset
-- decode, and row-at-a-time heap inserts (COPY fills a page per WAL record). Rows due within 1 s are
-- announced afterwards by enqueue_wake.sql. The driver reads the table and the column list
-- from this file; asyncpg sends the same statement.
copy x_jobs (id, run_id, name, queue, state, input, tenant_id, idempotency_key, max_attempts,
             run_at, created_at, updated_at, traceparent, enqueued_by, slot_key, priority)
  from stdin
