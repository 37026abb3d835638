-- webhooks_deliveries_purge_count: how many rows a webhooks_deliveries_purge pass would delete.
-- $1 cutoff ms
select count(*) as expired
  from x_webhook_deliveries d
 where d.at < x_ts($1::bigint)
   and not exists (select 1 from x_jobs j
                    where j.id = d.job_id
                      and j.state in ('ready', 'delayed', 'running', 'suspended'))
