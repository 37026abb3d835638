"""``ujobs``: every operator command, one module per command group (typer).

| Module | Holds |
|---|---|
| ``root`` | the root's options, its table of commands, ``main`` (loads the one it runs) |
| ``app`` | the full root (every command), for the tests and the reference pages |
| ``manifest`` | ``ujobs manifest``: every job and task descriptor as JSON |
| ``remote`` | the commands that also work against a remote api (``UJOBS_URL`` + ``UJOBS_TOKEN``) |
| ``common`` | what every operator command shares: its options, ``operate`` (reaching the backend) |
| ``services`` | the service commands: ``api``, ``worker``, ``relay``, ``scheduler``, ``dev``, … |
| ``jobs`` | ``ujobs jobs list | show`` and the group's root |
| ``jobs_common`` | the ``jobs`` commands' filter options and flag parsing |
| ``jobs_move`` | ``ujobs jobs retry | cancel | remove | promote`` |
| ``queues`` | ``ujobs queues list | pause | resume`` and ``ujobs workers`` |
| ``tasks`` | ``ujobs tasks list | pause | resume`` |
| ``tokens`` | ``ujobs tokens create | list | revoke`` |
| ``tenants`` | ``ujobs tenants weight <tenant> [<n>]``: weights in the fair claim |
| ``webhooks`` | ``ujobs webhooks …``: endpoints, publishing, deliveries, the key |
| ``exports`` | ``ujobs exports list | show | get`` |
| ``db`` | ``ujobs db migrate`` and the group's root |
| ``backfill`` | ``ujobs db backfill`` |
| ``nats`` | ``ujobs nats status``: the edge's streams, consumer and settlements |
| ``retention`` | ``ujobs db purge`` and the built-in ``x.purge`` the services register |

How a command prints, fails and shows progress is ``ujobs.services.runtime.output``.
``python -m ujobs.services.cli`` runs ``root.main`` (``__main__``).
"""
