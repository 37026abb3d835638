"""What the scheduler tests share: a job a task fires, task builders, reading what fired."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from ujobs import job, t
from ujobs.drivers.base import MAX_JOB_PAGE, JobDriver, JobFilter, JobRow
from ujobs.execution.run import Run
from ujobs.jobs.job import JobHandle
from ujobs.jobs.task import CatchUp, TaskHandle, task

HOUR = 3_600_000
DAY = 24 * HOUR
YEAR = 365 * DAY
T0 = int(datetime(2024, 6, 1, 12, 0, 30, tzinfo=UTC).timestamp() * 1000)
"""Thirty seconds past an hour: no occurrence of an hourly task falls on it."""


def tick_job(name: str = "tick") -> JobHandle[Any]:
    """A job whose key is its occurrence, like the spec's ``pollHosts``."""

    async def run(run: Run[Any]) -> None:
        return None

    return job(
        name=name,
        input=t.object(occurrence_ms=t.number.int()),
        idempotency_key=lambda i: f"{name}:{i.occurrence_ms}",
        tenant="none",
        run=run,
    )


def ticking_task(
    handle: JobHandle[Any],
    *,
    name: str = "hourly",
    cron: str = "0 * * * *",
    tz: str = "UTC",
    catch_up: CatchUp = "skip",
    max_catch_up: int = 10,
) -> TaskHandle:
    return task(
        name=name,
        cron=cron,
        tz=tz,
        catch_up=catch_up,
        max_catch_up=max_catch_up,
        enqueue=lambda occurrence_ms: [(handle, {"occurrence_ms": occurrence_ms})],
    )


async def queued_rows(driver: JobDriver) -> list[JobRow]:
    """Every row on the queue, through the operator surface (any driver with introspect)."""
    introspect = driver.introspect
    assert introspect is not None
    rows: list[JobRow] = []
    after: str | None = None
    while True:
        page = await introspect.list(JobFilter(limit=MAX_JOB_PAGE, after=after))
        rows.extend(page.rows)
        if page.is_last:
            return rows
        after = page.next_cursor


async def queued_occurrences(driver: JobDriver) -> list[int]:
    """The occurrence of every queued row, sorted (duplicates kept)."""
    return sorted(row.input["occurrence_ms"] for row in await queued_rows(driver))


def hours_from(start_ms: int, count: int) -> list[int]:
    """The ``count`` whole hours after ``start_ms``."""
    first = start_ms - start_ms % HOUR + HOUR
    return [first + i * HOUR for i in range(count)]


def last_hour_at_or_before(at_ms: int) -> int:
    return at_ms - at_ms % HOUR


def occurrences_of(fired: Sequence[Any]) -> list[int]:
    return [f.occurrence_ms for f in fired]
