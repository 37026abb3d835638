-- webhooks_endpoint_rotate: a new secret signs from now on; the old one keeps signing beside it
-- until $3 (so receivers can switch without dropping a delivery).
-- $1 id  $2 new sealed secret  $3 previous secret's expiry ms  $4 now ms
update x_webhook_endpoints
   set previous_secret_sealed = secret_sealed,
       previous_expires_at = x_ts($3::bigint),
       secret_sealed = $2::text,
       updated_at = x_ts($4::bigint)
 where id = $1::text
returning id
