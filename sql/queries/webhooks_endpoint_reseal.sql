-- webhooks_endpoint_reseal: store secrets sealed again under the current key, unless the row
-- changed since it was read (a rotation in between wins; the next reseal takes it).
-- $1 id  $2 secret as read  $3 secret resealed  $4 previous resealed (or null)
update x_webhook_endpoints
   set secret_sealed = $3::text, previous_secret_sealed = $4::text
 where id = $1::text and secret_sealed = $2::text
returning id
