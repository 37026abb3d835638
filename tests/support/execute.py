"""Shared helpers for the step and execution tests: a memory driver on a frozen clock, and the
enqueue → claim → execute loop the worker runs, one attempt at a time."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from ujobs.clock import FrozenClock
from ujobs.drivers.base import ClaimedJob, ClaimOptions, JobRow, StepRecord
from ujobs.drivers.memory.driver import MemoryDriver, memory_driver
from ujobs.execution.attempt import execute_job
from ujobs.execution.outcome import JobExecution
from ujobs.execution.run import Settled
from ujobs.jobs.job import JobHandle

T0 = 1_700_000_000_000


def frozen_driver() -> tuple[MemoryDriver, FrozenClock]:
    clock = FrozenClock(T0)
    return memory_driver(clock=clock), clock


async def enqueue(driver: MemoryDriver, handle: JobHandle[Any], input: Any = None) -> str:
    enqueued = await driver.enqueue(handle.request(input, clock=driver.clock))
    return enqueued.id


async def claim(
    driver: MemoryDriver, *, worker: str = "w1", visibility_ms: int = 30_000
) -> ClaimedJob:
    claimed = await driver.claim(
        ClaimOptions(queues=["default"], limit=1, worker_id=worker, visibility_ms=visibility_ms)
    )
    assert len(claimed) == 1, "expected one due job"
    return claimed[0]


async def attempt(
    driver: MemoryDriver, handle: JobHandle[Any], *, context: Any = None, **kwargs: Any
) -> JobExecution:
    """Claim the one due job and run one attempt of it."""
    claimed = await claim(driver)
    return await execute_job(claimed, driver=driver, handle=handle, context=context, **kwargs)


async def row(driver: MemoryDriver, job_id: str) -> JobRow:
    """The job as the operator surface shows it."""
    introspect = driver.introspect
    assert introspect is not None
    found = await introspect.get(job_id)
    assert found is not None, f"no job {job_id}"
    return found


async def steps_of(driver: MemoryDriver, job_id: str) -> list[StepRecord]:
    """The job's stored steps: its run under its own tenant."""
    found = await row(driver, job_id)
    return await driver.load_steps(found.run_id, tenant_id=found.tenant_id)


async def last_error(driver: MemoryDriver, job_id: str) -> str:
    """The job's last error, which the test expects it to have."""
    error = (await row(driver, job_id)).last_error
    assert error is not None, f"job {job_id} has no last error"
    return error


def told_input(settled: Settled[Any]) -> Any:
    """The input an ``on_settled`` hook was told, which the test expects to have parsed."""
    assert settled.input is not None, "on_settled was told no input"
    return settled.input


def records(caplog: pytest.LogCaptureFixture, message: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.getMessage() == message]


async def counts(driver: MemoryDriver, name: str) -> dict[str, int]:
    """The counters the settles moved for one job (``counter_totals`` since the epoch)."""
    introspect = driver.introspect
    assert introspect is not None
    for totals in await introspect.counter_totals(0):
        if totals.job == name:
            return {k: getattr(totals, k) for k in ("done", "retried", "failed", "dead")}
    return {"done": 0, "retried": 0, "failed": 0, "dead": 0}
