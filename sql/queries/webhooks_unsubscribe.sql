-- webhooks_unsubscribe: stop delivering these topics to an endpoint; answers each removed topic.
-- $1 endpoint id  $2 topics
delete from x_webhook_subscriptions
 where endpoint_id = $1::text and topic = any($2::text[])
returning topic
