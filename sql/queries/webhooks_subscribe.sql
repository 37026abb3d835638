-- webhooks_subscribe: subscribe an endpoint to topics ('*' is every topic).
-- $1 endpoint id  $2 topics
insert into x_webhook_subscriptions (topic, endpoint_id)
select t, $1::text from unnest($2::text[]) as t
on conflict do nothing
