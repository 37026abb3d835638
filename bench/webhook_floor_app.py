"""The app ``bench/webhook_deliveries.py`` gives its ``ujobs webhook-deliverer``
(``UJOBS_APP=webhook_floor_app:api``, this folder on ``PYTHONPATH``): two no-op jobs on the
``webhooks`` queue, drained by the same process at the same concurrency as the deliveries, so
the bench can print what a durable job alone costs there (the ceiling of any delivery).

* ``bench.floor`` — nothing: claim, run and settle of a durable job.
* ``bench.floor_slot`` — nothing, under the deliveries' per-endpoint cap (a fleet-wide slot
  per ``endpoint`` key, ``ENDPOINT_CONCURRENCY`` of them): the same plus that slot's lease.
"""

from __future__ import annotations

import sys
from typing import Any

from ujobs import KeyedConcurrency, Run, define_api, job, t
from ujobs.webhooks.builtin import ENDPOINT_CONCURRENCY
from ujobs.webhooks.family import WEBHOOKS_QUEUE


@job(
    name="bench.floor",
    input=t.object(n=t.number.int(), endpoint=t.string),
    idempotency_key=lambda i: f"floor:{i.n}",
    tenant="none",
    queue=WEBHOOKS_QUEUE,
)
async def floor(run: Run[Any]) -> None:
    """Nothing: the bench measures the job around it."""


@job(
    name="bench.floor_slot",
    input=t.object(n=t.number.int(), endpoint=t.string),
    idempotency_key=lambda i: f"floor_slot:{i.n}",
    tenant="none",
    queue=WEBHOOKS_QUEUE,
    concurrency=KeyedConcurrency(key=lambda i: i.endpoint, limit=ENDPOINT_CONCURRENCY),
)
async def floor_slot(run: Run[Any]) -> None:
    """Nothing, holding the endpoint's slot as a delivery does."""


api = define_api(jobs=[sys.modules[__name__]], install=False)
