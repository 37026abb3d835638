-- webhooks_is_disabled: the verdict the deliverer asks before every socket.
-- $1 endpoint id
select exists (select 1 from x_webhook_endpoints
                where id = $1::text and disabled_at is not null) as disabled
