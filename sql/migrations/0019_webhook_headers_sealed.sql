-- 0019: an endpoint's own header values (an `X-Api-Key`, a bearer token) are sealed at rest
-- like its secret. `headers_sealed` holds 'v1:<key id>:<base64>' of the JSON object
-- name -> value (AES-256-GCM under UJOBS_SECRET_KEY, '<endpoint id>/headers' as associated
-- data), and `headers` then maps each name to '' (names stay listable; values live only in
-- the seal).
--
-- SQL has no key, so this migration seals nothing: a row written before it keeps its values
-- in clear in `headers` with `headers_sealed` null, and is delivered as it is. The webhook
-- deliverer seals such rows when it starts, and `ujobs webhooks reseal` seals them too.
alter table x_webhook_endpoints add column headers_sealed text;
