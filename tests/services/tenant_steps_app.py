"""The app of the steps-tenancy tests: a quote whose first step stores the input's price and
whose progress note says which price the run went on, so a caller reading its own job over
HTTP sees whether its run replayed someone else's stored output."""

from __future__ import annotations

import sys
from typing import Any

from ujobs import Run, define_api, job, t


@job(
    input=t.object(org_id=t.string, price=t.number.int()),
    idempotency_key=lambda i: f"quote:{i.org_id}:{i.price}",
    tenant=lambda i: i.org_id,
)
async def quote(run: Run[Any]) -> None:
    price = await run.step.run("price", lambda _signal: run.input.price)
    if price > 50:
        await run.step.run("approval", lambda _signal: f"approved {price}")
    run.progress(1, 1, f"quoted {price}")


api = define_api(jobs=[sys.modules[__name__]], install=False)
