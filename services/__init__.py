"""``ujobs.services``: the processes ultimate-jobs ships, and the operator CLI.

| Module or package | Holds |
|---|---|
| ``api`` | ``ujobs api``: the HTTP edge, routes by resource, auth, tokens, OpenAPI |
| ``nats`` | the NATS edge the api runs: request/reply, the stream consumer, settlements |
| ``dashboard`` | the operator dashboard at ``/_x`` on the api |
| ``cli`` | the ``ujobs`` command: one module per command group |
| ``config`` | every setting a service reads, from the environment, once |
| ``runtime`` | what every service process shares: its run, wiring, logs, metrics |
| ``dev`` | ``ujobs dev``: every service in one process |
| ``worker`` | ``ujobs worker``: runs the app's jobs |
| ``scheduler`` | ``ujobs scheduler``: fires the app's cron tasks |
| ``relay`` | ``ujobs relay``: publishes the outbox |
| ``webhook_deliverer`` | ``ujobs webhook-deliverer``: delivers webhooks |
| ``exporter`` | ``ujobs exporter``: writes exports |
| ``example_app`` | the app ``ujobs dev --example`` runs |
| ``redact`` | secrets out of every printed line (config, logs, the CLI, the edges) |

Nothing in ``ujobs`` outside this package imports it.
"""
