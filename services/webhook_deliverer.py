"""``ujobs webhook-deliverer``: a worker pinned to the ``webhooks`` queue, running the webhook
families.

Outbound webhooks are jobs (one event, one endpoint, one job), so delivering them is running a
worker on their queue — on its own pods, sized for slow partners (many slots, little CPU), so
a partner timing out never takes a slot from the app's own jobs. ``UJOBS_QUEUES`` does not
apply; everything else a worker reads does, plus the webhook settings: ``UJOBS_SECRET_KEY``
or ``UJOBS_SECRET_KEY_FILE`` (endpoint secrets are sealed at rest),
``UJOBS_WEBHOOK_ALLOW_PRIVATE`` and ``UJOBS_WEBHOOK_ALLOW_HTTP`` (the SSRF guard's exceptions).

The built-in families (``ujobs.webhooks.builtin``) are always registered, with or without an app;
the app's own ``webhook()`` families on the ``webhooks`` queue run here too.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from ujobs.jobs.registry import Registry
from ujobs.services.config.parse import choice, whole
from ujobs.services.config.settings import WorkerConfig
from ujobs.services.runtime.app_loader import load_api
from ujobs.services.runtime.secret_key import secret_key_text
from ujobs.services.runtime.service_run import ServiceRun
from ujobs.services.runtime.wiring import wire
from ujobs.webhooks import builtin
from ujobs.webhooks.client import WebhookClient
from ujobs.webhooks.family import WEBHOOKS_QUEUE, install_client
from ujobs.webhooks.secrets import SecretBox
from ujobs.webhooks.ssrf import GuardPolicy
from ujobs.webhooks.store_pg import PgWebhookStore
from ujobs.worker import JobWorker

log = logging.getLogger("ujobs.webhooks")

# Successful attempts reach the ledger in one statement per this many milliseconds.
LEDGER_BATCH_MS = 10


@dataclass(frozen=True, slots=True)
class WebhookSettings:
    """What the deliverer and the webhook commands read beyond a worker's settings."""

    box: SecretBox
    policy: GuardPolicy
    endpoint_concurrency: int = builtin.ENDPOINT_CONCURRENCY


def webhook_settings(env: Mapping[str, str]) -> WebhookSettings:
    allow_http = (
        choice("UJOBS_WEBHOOK_ALLOW_HTTP", env.get("UJOBS_WEBHOOK_ALLOW_HTTP") or "0", ("0", "1"))
        == "1"
    )
    cap = env.get("UJOBS_WEBHOOK_ENDPOINT_CONCURRENCY") or ""
    return WebhookSettings(
        box=SecretBox.parse(secret_key_text(env)),
        policy=GuardPolicy.parse(env.get("UJOBS_WEBHOOK_ALLOW_PRIVATE"), allow_http=allow_http),
        endpoint_concurrency=(
            whole("UJOBS_WEBHOOK_ENDPOINT_CONCURRENCY", cap)
            if cap.strip()
            else builtin.ENDPOINT_CONCURRENCY
        ),
    )


def webhook_deliverer_config(
    env: Mapping[str, str], *, app: str | None = None, driver: str | None = None
) -> WorkerConfig:
    return WorkerConfig.load(
        env, service="webhook-deliverer", pinned_queues=(WEBHOOKS_QUEUE,), app=app, driver=driver
    )


def deliverer_registry(
    app: str | None, endpoint_concurrency: int = builtin.ENDPOINT_CONCURRENCY
) -> Registry:
    """The app's jobs (if any) and the built-in families, always."""
    registry = Registry()
    registry.merge(load_api(app))
    registry.merge(builtin.families(endpoint_concurrency))
    return registry


async def start_webhook_deliverer(
    run: ServiceRun, config: WorkerConfig, settings: WebhookSettings
) -> JobWorker:
    """Open the backend (Postgres always: the endpoints and the ledger live there), seal the
    header values a row from before migration 0019 keeps in clear, install the store and the
    guarded client, and start the worker; all undone after the drain."""
    from ujobs.services.runtime.metrics_server import serve_metrics
    from ujobs.services.worker import start_worker

    wired = await wire(run, config.common.connections, listen=True, need_database=True)
    await serve_metrics(run, config.metrics, wired.backend)
    pool = wired.backend.require_pool("the webhook deliverer")
    client = WebhookClient(settings.policy)
    install_client(client)
    store = PgWebhookStore(
        pool, settings.box, policy=settings.policy, batch_delivered_ms=LEDGER_BATCH_MS
    )
    sealed = await store.seal_clear_headers()
    if sealed:
        log.info("ujobs.webhooks.headers-sealed", extra={"endpoints": sealed})
    builtin.install_store(store)
    run.stack.callback(builtin.install_store, None)
    run.stack.push_async_callback(store.ledger.close)  # after the drain, before the pool
    run.stack.callback(install_client, None)
    run.stack.push_async_callback(client.close)
    return await start_worker(
        run,
        config,
        registry=deliverer_registry(config.common.app, settings.endpoint_concurrency),
        wired=wired,
    )
