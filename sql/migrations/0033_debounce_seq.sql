-- 0033: the debounce order a waiting run took (EnqueueRequest.debounce_seq). The NATS edge
-- gives a stream message's sequence; enqueue_controlled.sql moves a waiting run only for a
-- debounce whose seq is above the one the run holds (either null: it moves), so a message
-- delivered again after a newer one of its key never puts its older input back. Nullable
-- without a default: adding it rewrites nothing and takes the table's lock only for the
-- catalog update; no index reads it (the debounce finds its run by the live-key index).
alter table x_jobs add column debounce_seq bigint;
