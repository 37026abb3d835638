"""``ujobs webhook-deliverer``: a worker pinned to the ``webhooks`` queue.

Outbound webhooks are jobs (one event, one endpoint, one job), so delivering them is running a
worker on their queue — on its own pods, sized for slow partners (many slots, little CPU), so
a partner timing out never takes a slot from the app's own jobs. ``UJOBS_QUEUES`` does not
apply; everything else a worker reads does.
"""

from __future__ import annotations

from collections.abc import Mapping

from services.config import WorkerConfig

WEBHOOKS_QUEUE = "webhooks"


def webhook_deliverer_config(
    env: Mapping[str, str], *, app: str | None = None, driver: str | None = None
) -> WorkerConfig:
    return WorkerConfig.load(
        env, service="webhook-deliverer", pinned_queues=(WEBHOOKS_QUEUE,), app=app, driver=driver
    )
