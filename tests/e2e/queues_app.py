"""An app whose jobs name their own queues (``mail``, ``reports``): a worker given no queues
serves every one of them."""

from __future__ import annotations

import sys
from typing import Any

from ujobs import Run, define_api, job, t


@job(
    input=t.object(n=t.number.int()),
    idempotency_key=lambda i: f"mail:{i.n}",
    tenant="none",
    queue="mail",
)
async def send_mail(run: Run[Any]) -> None:
    await run.step.run("sent", lambda _: run.input.n)


@job(
    input=t.object(n=t.number.int()),
    idempotency_key=lambda i: f"report:{i.n}",
    tenant="none",
    queue="reports",
)
async def build_report(run: Run[Any]) -> None:
    await run.step.run("built", lambda _: run.input.n)


api = define_api(jobs=[sys.modules[__name__]], install=False)
