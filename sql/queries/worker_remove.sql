-- worker_remove: a worker that stopped cleanly leaves the registry.
-- $1 id
delete from x_job_workers w where w.id = $1::text
