"""The app of the cross-process event test: ``await_approval`` waits for ``approval`` (on the
``default`` queue), ``approve`` publishes it from a job of the ``signals`` queue — so with one
worker process per queue, the publish and the wait are in different processes."""

from __future__ import annotations

import sys
from typing import Any

from ujobs import Run, define_api, job, publish_event, t


@job(
    input=t.object(order=t.string, timeout_ms=t.number.int()),
    idempotency_key=lambda i: f"await:{i.order}",
    tenant="none",
    retry={"attempts": 1},
    event_poll="200ms",
)
async def await_approval(run: Run[Any]) -> Any:
    return await run.step.wait_for_event(
        "approval",
        "order.approved",
        match={"order": run.input.order},
        timeout=run.input.timeout_ms,
    )


@job(
    input=t.object(order=t.string, by=t.string),
    idempotency_key=lambda i: f"approve:{i.order}",
    tenant="none",
    queue="signals",
)
async def approve(run: Run[Any]) -> None:
    await publish_event("order.approved", {"order": run.input.order, "by": run.input.by})


api = define_api(jobs=[sys.modules[__name__]], install=False)
