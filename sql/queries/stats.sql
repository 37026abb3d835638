-- stats: per queue and state, with how many claimable rows are due and the oldest due run_at.
-- Reads the whole table: an operator/metrics read, never on the claim path.
-- $1 now ms
select j.queue, j.state, count(*) as n,
       count(*) filter (where j.state in ('ready', 'delayed', 'suspended')
                          and j.run_at <= x_ts($1::bigint)) as due,
       x_ms(min(j.run_at) filter (where j.state in ('ready', 'delayed', 'suspended')
                                    and j.run_at <= x_ts($1::bigint))) as oldest_due_ms
  from x_jobs j
 group by j.queue, j.state
 order by j.queue, j.state
