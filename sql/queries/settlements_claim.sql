-- settlements_claim: the oldest pending settlements, in seq order, locked for this relay's
-- transaction (another relay skips them and takes the next ones), to publish then mark.
-- $1 limit
select s.seq, s.job_id, s.run_id, s.name, s.tenant_id, s.outcome, s.code, s.attempt,
       (extract(epoch from s.settled_at) * 1000)::bigint as settled_at_ms
  from x_settlements s
 where s.published_at is null
 order by s.seq
 limit $1::int
   for update skip locked
