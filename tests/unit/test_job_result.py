"""``await handle.result(job_id, timeout=...)`` and ``await enqueued.result(timeout=...)``: the
stored value, the job's failure raised with its code, ``X_TIMEOUT`` while it is live."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.execute import attempt
from ujobs.drivers.memory.driver import MemoryDriver
from ujobs.errors import (
    JobFailedError,
    JobNotFoundError,
    OperationTimeoutError,
    UltimateError,
    register_error_retry,
)
from ujobs.execution.run import Run
from ujobs.ids import new_id
from ujobs.jobs.job import job
from ujobs.jobs.retry import Retry
from ujobs.jobs.schema import t
from ujobs.testing import install_memory_driver, uninstall_memory_driver

register_error_retry({"X_TEST_RESULT_TERMINAL": "terminal"})


class Refused(UltimateError):
    code = "X_TEST_RESULT_TERMINAL"


@pytest.fixture
def driver() -> Iterator[MemoryDriver]:
    yield install_memory_driver()
    uninstall_memory_driver()


@job(
    name="result.total",
    input=t.object(n=t.number.int()),
    idempotency_key=lambda i: f"total:{i.n}",
    tenant="none",
    retry=Retry(attempts=2, jitter=False),
)
async def total(run: Run[Any]) -> dict[str, int]:
    if run.input.n < 0:
        raise Refused("negative")
    if run.input.n == 0:
        raise ConnectionError("flaky")
    return {"total": run.input.n * 2}


@job(name="result.other", idempotency_key="k", tenant="none")
async def other(run: Run[Any]) -> str:
    return "other"


async def test_the_enqueue_answer_reads_the_result_once_it_settles(driver: MemoryDriver) -> None:
    enqueued = await total.enqueue({"n": 21})
    waiting = asyncio.create_task(enqueued.result(timeout="30s"))
    assert (await attempt(driver, total)).outcome == "completed"
    assert await waiting == {"total": 42}
    assert await total.result(enqueued.id, timeout=0) == {"total": 42}


async def test_a_terminal_failure_is_raised_with_the_jobs_code(driver: MemoryDriver) -> None:
    enqueued = await total.enqueue({"n": -1})
    await attempt(driver, total)
    with pytest.raises(JobFailedError) as failed:
        await enqueued.result(timeout="1s")
    assert failed.value.code == "X_TEST_RESULT_TERMINAL"
    assert failed.value.meta == {"jobId": enqueued.id, "name": "result.total", "state": "dead"}
    assert "negative" in failed.value.message
    assert "Traceback" not in failed.value.message


async def test_exhausted_attempts_raise_x_job_max_attempts(driver: MemoryDriver) -> None:
    enqueued = await total.enqueue({"n": 0})
    await attempt(driver, total)
    driver.clock.advance(60_000)  # type: ignore[attr-defined]
    await attempt(driver, total)
    with pytest.raises(JobFailedError) as failed:
        await total.result(enqueued.id, timeout="1s")
    assert failed.value.code == "X_JOB_MAX_ATTEMPTS"


async def test_a_cancelled_job_raises_x_job_failed(driver: MemoryDriver) -> None:
    enqueued = await total.enqueue({"n": 3})
    assert driver.introspect is not None
    await driver.introspect.cancel(enqueued.id, "not needed")
    with pytest.raises(JobFailedError) as failed:
        await enqueued.result(timeout="1s")
    assert (failed.value.code, failed.value.meta["state"]) == ("X_JOB_FAILED", "cancelled")


async def test_a_live_job_answers_x_timeout_when_the_time_runs_out(driver: MemoryDriver) -> None:
    enqueued = await total.enqueue({"n": 5})
    with pytest.raises(OperationTimeoutError) as late:
        await enqueued.result(timeout=0)
    assert late.value.meta == {"jobId": enqueued.id, "state": "ready", "timeoutMs": 0}


async def test_an_unknown_id_or_another_jobs_is_not_found(driver: MemoryDriver) -> None:
    with pytest.raises(JobNotFoundError):
        await total.result(new_id(), timeout="1s")
    theirs = await other.enqueue()
    with pytest.raises(JobNotFoundError):
        await total.result(theirs.id, timeout="1s")


async def test_a_bad_timeout_is_refused(driver: MemoryDriver) -> None:
    enqueued = await total.enqueue({"n": 1})
    with pytest.raises(UltimateError) as bad:
        await enqueued.result(timeout="soon")
    assert bad.value.code == "X_INVARIANT"
