-- webhooks_redeliver_candidates: the events an endpoint failed (or skipped while disabled)
-- since $2 and has never delivered: what `ujobs webhooks redeliver --since` queues again.
-- $1 endpoint id  $2 since ms
select distinct d.event_id
  from x_webhook_deliveries d
 where d.endpoint_id = $1::text and d.at >= x_ts($2::bigint) and d.outcome <> 'delivered'
   and not exists (select 1 from x_webhook_deliveries ok
                    where ok.endpoint_id = d.endpoint_id and ok.event_id = d.event_id
                      and ok.outcome = 'delivered')
 order by d.event_id
