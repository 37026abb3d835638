"""The operator dashboard at ``/_x`` on ``ujobs api``: server-rendered pages (Jinja2 templates
and a little plain JavaScript, every asset shipped in this package) over the same operator
functions the CLI and the HTTP edge call (``ujobs.introspect``, ``ujobs.services.cli.tasks``).

| Module | Holds |
|---|---|
| ``session`` | the login cookie (HttpOnly, SameSite=Strict), who is viewing, CSRF tokens |
| ``render`` | the Jinja2 environment, its filters (times, durations) and HTML error pages |
| ``pages`` | read-only pages: queues (and tenants), jobs, a job, dead letters, workers, tasks |
| ``pages_backfills`` | the ``x_backfills`` ledger beside what the app declares |
| ``pages_webhooks`` | webhook endpoints and their delivery attempts (never a secret) |
| ``pages_exports`` | exports, one export's manifest and its signed download links |
| ``not_found`` | an unknown path under ``/_x`` as an HTML 404 (``/v1`` keeps JSON) |
| ``views`` | ``guarded``: an ``X_…`` error as a page; the message an action's redirect shows |
| ``actions`` | the confirmed, audit-logged moves: retry, cancel, promote, pause, resume, and
disable or enable a webhook endpoint |
| ``routes`` | ``setup_dashboard(app)``: what ``ujobs.services.api.app.create_app`` registers |

A tenant token sees only its own tenant's jobs, endpoints and exports; queues, workers, tasks
and the backfill ledger span every tenant and need an operator token, exactly as on ``/v1``.
"""
