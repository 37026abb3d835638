"""The app the end-to-end services test runs: an order job (fast, or slow to drain under load)
and a cron task firing every second."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from ujobs import Retry, Run, define_api, job, t, task
from ujobs.jobs.task import TaskEntry


@job(
    input=t.object(order=t.string, ms=t.number.int()),
    idempotency_key=lambda i: f"order:{i.order}",
    tenant="none",
    retry=Retry(attempts=3),
)
async def process_order(run: Run[Any]) -> None:
    async def work(_: object) -> None:
        # Reported from INSIDE the step: once a test sees it, a drain can no longer refuse the
        # step (only a step not yet started is refused), so the body is truly in flight.
        run.progress(0, 2, "working")
        await asyncio.sleep(run.input.ms / 1000)

    await run.step.run("work", work)
    await run.step.run("receipt", lambda _: {"order": run.input.order})


@job(
    input=t.object(occurrence_ms=t.number.int()),
    idempotency_key=lambda i: f"tick:{i.occurrence_ms}",
    tenant="none",
)
async def tick(run: Run[Any]) -> None:
    await run.step.run("tock", lambda _: run.input.occurrence_ms)


@task(cron="* * * * * *", tz="UTC", catch_up="skip")
def every_second(occurrence_ms: int) -> list[TaskEntry]:
    return [(tick, {"occurrence_ms": occurrence_ms})]


api = define_api(jobs=[sys.modules[__name__]], tasks=[sys.modules[__name__]], install=False)
