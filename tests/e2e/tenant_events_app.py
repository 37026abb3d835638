"""The app of the event-tenancy test: ``await_approval`` waits, as its org, for the
``order.approved`` event of its order."""

from __future__ import annotations

import sys
from typing import Any

from ujobs import Run, define_api, job, t


@job(
    input=t.object(org_id=t.string, order=t.string),
    idempotency_key=lambda i: f"await:{i.org_id}:{i.order}",
    tenant=lambda i: i.org_id,
    retry={"attempts": 1},
    event_poll="100ms",
)
async def await_approval(run: Run[Any]) -> Any:
    return await run.step.wait_for_event(
        "approval", "order.approved", match={"order": run.input.order}, timeout="2m"
    )


api = define_api(jobs=[sys.modules[__name__]], install=False)
