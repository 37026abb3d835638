-- 0030: priority first, fair inside a band (issue 41 with 0028's priority). The fair claim
-- walks one band of a queue, its top band (the lowest priority with due work), by tenant, so
-- its index leads with the band: x_jobs_fair_idx becomes (queue, priority,
-- coalesce(tenant_id, ''), run_at, seq), same predicate as the claim indexes. One loose scan
-- per claim then stays inside one band: its tenants, each tenant's oldest rows of that band.
drop index x_jobs_fair_idx;
create index x_jobs_fair_idx on x_jobs (queue, priority, coalesce(tenant_id, ''), run_at, seq)
  where state in ('ready', 'delayed', 'suspended');
