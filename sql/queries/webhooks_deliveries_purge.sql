-- webhooks_deliveries_purge: delete up to $2 x_webhook_deliveries rows recorded before $1 (now
-- minus the retention, on the caller's clock), oldest first along the primary key (seq grows
-- with `at`). The attempts of a delivery still live (ready, delayed, running, suspended) are
-- kept with it: they are its history while it can still be delivered. skip locked: two sweeps
-- split the work instead of waiting on each other.
-- $1 cutoff ms  $2 batch size
with doomed as (
  select d.seq
    from x_webhook_deliveries d
   where d.at < x_ts($1::bigint)
     and not exists (select 1 from x_jobs j
                      where j.id = d.job_id
                        and j.state in ('ready', 'delayed', 'running', 'suspended'))
   order by d.seq
   limit $2::int
     for update of d skip locked
),
deleted as (
  delete from x_webhook_deliveries d where d.seq = any(array(select seq from doomed))
  returning d.seq
)
select count(*) as deleted from deleted
