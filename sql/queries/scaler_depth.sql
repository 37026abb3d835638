-- scaler_depth: the statement a scaler (KEDA's postgresql trigger) runs, from the spec's
-- "The process cap": running jobs plus due, claimable ones of the queues, minus the jobs a
-- DRAINING worker still holds (a claimer whose registry row lapsed is counted again), and
-- never a paused queue's backlog. KEDA binds nothing: inline the queues as
-- '{a,b}'::text[] in place of $1 (sql/README.md shows the literal form).
-- $1 queues
select count(*)::int as depth
  from x_jobs j
 where j.queue = any($1::text[])
   and ((j.state = 'running'
         and not exists (select 1 from x_job_workers w where w.id = j.claimed_by
                            and w.draining_at is not null and w.expires_at > now()))
     or (j.state in ('ready', 'delayed', 'suspended') and j.run_at <= now()
         and not exists (select 1 from x_job_pauses p where p.kind = 'queue' and p.name = j.queue)))
