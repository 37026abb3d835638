-- 0029: tenant-fair claims (issue 41). Named 0029 because 0028 is priority's; the migrator
-- applies every file it has not recorded, in name order, so a gap (or a 0028 that lands
-- after this one was applied) is applied once like any other file.
--
-- The claim hands out the due rows of a queue by tenant, weighted round robin from a rotating
-- cursor (sql/queries/claim.sql): `x_fair_cursors` holds, per queue, the tenant the last claim
-- served last ('' is the group of jobs without a tenant), so the next claim starts after it.
-- One small row per queue, updated by each claim that handed out a fair row.
create table x_fair_cursors (
  queue  text collate "C" primary key,
  tenant text collate "C" not null
);

-- An operator's weight per tenant (`ujobs tenants weight`, PUT /v1/tenants/{tenant}/weight):
-- a contended claim hands a tenant of weight 3 three rows for every one of a tenant of weight
-- 1. A tenant without a row weighs 1; the claim reads the table on every call, so a change
-- takes effect at the next claim, without a restart.
create table x_tenant_weights (
  tenant_id text collate "C" primary key,
  weight    int not null check (weight between 1 and 1000)
);

-- What the fair claim walks: the claimable rows of a queue by tenant, each tenant's oldest
-- first. The walk over tenants is a loose index scan (one descent per tenant it visits, from
-- the cursor), and each tenant's rows are the head of its own range, so a claim's cost grows
-- with the rows it hands out, never with how many tenants have work. Same predicate as
-- x_jobs_claim_idx: only claimable rows enter it.
create index x_jobs_fair_idx on x_jobs (queue, coalesce(tenant_id, ''), run_at, seq)
  where state in ('ready', 'delayed', 'suspended');
