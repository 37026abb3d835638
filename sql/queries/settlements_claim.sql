-- settlements_claim: the oldest pending settlements, in seq order, locked for this relay's
-- transaction, to publish then mark. One relay at a time: the statement first tries the
-- transaction-scoped advisory lock $2 (an init plan, taken once), and a relay that does not
-- get it claims nothing this pass. Rows locked by another relay alone would not do: a second
-- relay would skip a job's earlier settlement and publish its later one first.
-- $1 limit  $2 the relays' advisory lock key
select s.seq, s.job_id, s.run_id, s.name, s.tenant_id, s.outcome, s.code, s.attempt,
       (extract(epoch from s.settled_at) * 1000)::bigint as settled_at_ms
  from x_settlements s
 where (select pg_try_advisory_xact_lock($2::bigint))
   and s.published_at is null
 order by s.seq
 limit $1::int
   for update skip locked
