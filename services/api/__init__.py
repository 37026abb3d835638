"""``ujobs api``: the HTTP edge (aiohttp), its routes by resource, and who may call them.

| Module | Holds |
|---|---|
| ``app`` | ``create_app(config)`` and the service's start: every route module registered |
| ``common`` | the app's typed keys, the error envelope and its statuses, reading a body |
| ``auth`` | who is calling and what they may do (the NATS edge uses it too) |
| ``tokens`` | the bearer tokens' Postgres store: minted once, stored as a hash |
| ``token_facts`` | what an api process keeps of a token between requests (what never changes) |
| ``token_guard`` | the single enqueue's revocation check, inside the enqueue statement |
| ``ratelimit`` | the per-token rate limit (``UJOBS_API_RATE_PER_TOKEN``) |
| ``enqueue`` | ``POST /v1/jobs/{name}``, its ``/batch`` and ``POST /v1/events/{name}`` |
| ``enqueue_child`` | ``parentId`` on a single enqueue: a child, named by an operator token |
| ``enqueue_batcher`` | group commit of concurrent single enqueues |
| ``strict_batch`` | ``/batch`` under ``"onConflict": "error"`` |
| ``jobs`` | the operator surface, one job at a time |
| ``results`` | a job's result: ``GET /v1/jobs/{id}/result?wait=``, the enqueue-and-wait's answer |
| ``queues`` | queues and tasks |
| ``tenants`` | tenant weights for the fair claim (operator tokens; a tenant's is a 404) |
| ``token_routes`` | the token list (``GET /v1/tokens``, operator ``admin``) |
| ``task_rows`` | each cron task as a row (the CLI and the dashboard read them too) |
| ``webhooks`` | webhook endpoints and their deliveries |
| ``exports`` | an export's manifest and its parts behind signed links |
| ``public_url`` | where the links the api hands out point (``UJOBS_PUBLIC_URL``) |
| ``openapi`` | the OpenAPI document (``GET /v1/openapi.json``) |
| ``openapi_schemas`` | its component schemas |
| ``openapi_webhooks`` | its webhook endpoint paths |
| ``openapi_shapes`` | the shapes generators read: named bodies, ``allOf`` of ``$ref``s |

Route modules import ``common``, never ``app``: ``app`` imports them all.
"""
