-- scaler_depth: the statement a scaler (KEDA's postgresql trigger) runs, from the spec's
-- "The process cap": running jobs plus due, claimable ones of the queues, minus the jobs a
-- DRAINING worker still holds (a claimer whose registry row lapsed is counted again), and
-- never a paused queue's backlog. KEDA binds nothing: inline the queues as
-- '{a,b}'::text[] in place of $1 (sql/README.md shows the literal form).
-- It counts every due row, so it reads them all, but only those: the running rows by the
-- running index's queue prefix, the due ones per queue and band (0..9) as a range of
-- x_jobs_claim_priority_idx (queue, priority, run_at, seq) up to now(), so the rows waiting on
-- a future run_at are never read. Each band's rows are asked for in that index's order:
-- x_jobs_fair_idx (queue, priority, tenant, run_at, seq) matches the same equalities, and for
-- a bare count (`priority = any('{0,...,9}')` and no order) a never-analyzed table's planner
-- costs the two alike and may walk the fair index, filtering on run_at inside it: every
-- claimable row of the queue read. Asked for in order, only the claim index serves the range
-- without a sort (tests/integration/test_postgres_fresh_reads.py reads it from the plan).
-- $1 queues
select ((select count(*)
           from x_jobs j
          where j.queue = any($1::text[])
            and j.state = 'running'
            and not exists (select 1 from x_job_workers w where w.id = j.claimed_by
                               and w.draining_at is not null and w.expires_at > now()))
      + (select count(*)
           from (select distinct q.name from unnest($1::text[]) q(name)) q
          cross join generate_series(0, 9) b(priority)
          cross join lateral (
            select 1
              from x_jobs j
             where j.queue = q.name
               and j.priority = b.priority
               and j.state in ('ready', 'delayed', 'suspended')
               and j.run_at <= now()
             order by j.run_at, j.seq) d
          where not exists (select 1 from x_job_pauses p where p.kind = 'queue'
                               and p.name = q.name)))::int as depth
