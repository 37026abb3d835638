-- settlements_claim: the oldest pending settlements, in seq order, locked for this relay's
-- transaction, to publish then mark. One relay at a time: the statement first tries the
-- transaction-scoped advisory lock $2 (an init plan, taken once), and a relay that does not
-- get it claims nothing this pass. Rows locked by another relay alone would not do: a second
-- relay would skip a job's earlier settlement and publish its later one first.
-- A `completed` settlement of a job the api was told to carry results for ($4 every job, or
-- its name in $3: UJOBS_NATS_SETTLEMENT_RESULTS) reads the job's stored result through the
-- primary key (result_state 'shown', or 'too-large' past $5 bytes, then no result); every
-- other row joins nothing ('none').
-- $1 limit  $2 the relays' advisory lock key  $3 job names whose results ride along
-- $4 every job's result rides along (bool)  $5 the most bytes of a result carried
select s.seq, s.job_id, s.run_id, s.name, s.tenant_id, s.outcome, s.code, s.attempt,
       (extract(epoch from s.settled_at) * 1000)::bigint as settled_at_ms,
       case when r.result_text is null then 'none'
            when octet_length(r.result_text) > $5::int then 'too-large'
            else 'shown' end as result_state,
       case when octet_length(r.result_text) <= $5::int then r.result_text end as result
  from x_settlements s
  left join lateral (
    select coalesce(j.result::text, 'null') as result_text
      from x_jobs j
     where j.id = s.job_id
       and s.outcome = 'completed'
       and ($4::bool or s.name = any($3::text[]))
  ) r on true
 where (select pg_try_advisory_xact_lock($2::bigint))
   and s.published_at is null
 order by s.seq
 limit $1::int
   for update of s skip locked
