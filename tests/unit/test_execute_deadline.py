"""The deadline cancels: the signal first, then the task; a body that will not stop is
abandoned, fenced out of the run, and logged when it finally ends. A lost lease does the same."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from tests.support.execute import (
    attempt,
    claim,
    enqueue,
    frozen_driver,
    last_error,
    records,
    row,
    steps_of,
)
from ujobs.drivers.base import ClaimOptions
from ujobs.errors import (
    JobAbortedError,
    JobMaxAttemptsError,
    JobTimeoutError,
    LeaseLostError,
    UltimateError,
)
from ujobs.execution.attempt import execute_job
from ujobs.execution.run import Run, Settled
from ujobs.jobs.job import job
from ujobs.jobs.retry import Retry
from ujobs.signal import Signal


def _declare(body: Any, *, timeout: str | None = "30ms", **options: Any) -> Any:
    options.setdefault("retry", Retry(attempts=3, jitter=False))
    return job(
        idempotency_key="k", tenant="none", name=f"t.{body.__name__}", timeout=timeout, **options
    )(body)


async def _until(predicate: Any, timeout_s: float = 5.0) -> None:
    async with asyncio.timeout(timeout_s):
        while not predicate():
            await asyncio.sleep(0.005)


async def test_the_deadline_aborts_the_signal_then_cancels_the_task(
    caplog: pytest.LogCaptureFixture,
) -> None:
    driver, _clock = frozen_driver()
    seen: dict[str, Any] = {}

    async def hangs(run: Run[Any]) -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            seen["aborted_first"] = run.signal.aborted
            seen["reason"] = run.signal.reason
            raise

    handle = _declare(hangs)
    job_id = await enqueue(driver, handle)
    execution = await attempt(driver, handle)
    assert seen["aborted_first"] is True
    assert isinstance(seen["reason"], UltimateError)
    assert seen["reason"].code == "X_JOB_TIMEOUT"
    assert (execution.outcome, execution.code, execution.abandoned) == (
        "retried",
        "X_JOB_TIMEOUT",
        False,
    )
    assert (await last_error(driver, job_id)).startswith("X_JOB_TIMEOUT")
    assert (await row(driver, job_id)).state == "ready"
    assert records(caplog, "jobs.timeout.abandoned") == []


async def test_a_timeout_on_the_final_attempt_dead_letters() -> None:
    driver, _ = frozen_driver()

    async def slow_last(run: Run[Any]) -> None:
        await asyncio.sleep(60)

    handle = _declare(slow_last, retry=Retry(attempts=1))
    await enqueue(driver, handle)
    execution = await attempt(driver, handle)
    assert (execution.outcome, execution.code, execution.stop_reason) == (
        "dead-lettered",
        "X_JOB_MAX_ATTEMPTS",
        "attempts-exhausted",
    )
    assert isinstance(execution.error, JobMaxAttemptsError)
    assert isinstance(execution.error.__cause__, JobTimeoutError)
    stored = (await row(driver, execution.job_id)).last_error
    assert stored is not None
    assert stored.startswith("X_JOB_MAX_ATTEMPTS: attempt 1 of 1 failed")
    assert "X_JOB_TIMEOUT" in stored


async def test_past_the_deadline_every_step_write_is_x_aborted() -> None:
    driver, _ = frozen_driver()
    refused: list[str] = []

    async def writes_after(run: Run[Any]) -> None:
        await run.step.run("before", lambda s: 1)
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            try:
                await run.step.run("after", lambda s: 2)
            except JobAbortedError as exc:
                refused.append(exc.code)
            raise

    handle = _declare(writes_after)
    job_id = await enqueue(driver, handle)
    execution = await attempt(driver, handle)
    assert refused == ["X_ABORTED"]
    assert execution.code == "X_JOB_TIMEOUT"  # the verdict is read off the signal
    steps = await steps_of(driver, job_id)
    assert [s.name for s in steps] == ["before"]


async def test_a_body_that_swallows_the_cancel_is_abandoned_and_logged_when_it_ends(
    caplog: pytest.LogCaptureFixture,
) -> None:
    driver, _ = frozen_driver()
    release = asyncio.Event()
    late: list[str] = []

    async def ignores_signal(run: Run[Any]) -> str:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await release.wait()  # swallows the cancel and keeps going
        try:
            await run.step.run("late-write", lambda s: 1)
        except JobAbortedError as exc:
            late.append(exc.code)
        run.progress(1, 1)
        return "finished anyway"

    handle = _declare(ignores_signal)
    job_id = await enqueue(driver, handle)
    execution = await attempt(driver, handle, abandon_grace_ms=10)
    assert execution.abandoned is True
    assert (execution.outcome, execution.code) == ("retried", "X_JOB_TIMEOUT")
    assert (await row(driver, job_id)).state == "ready"  # settled without waiting for the body
    assert records(caplog, "jobs.timeout.abandoned") == []

    release.set()
    await _until(lambda: records(caplog, "jobs.timeout.abandoned"))
    [logged] = records(caplog, "jobs.timeout.abandoned")
    assert logged.levelno == logging.WARNING
    assert (logged.ended, logged.after_settle, logged.reason) == (  # type: ignore[attr-defined]
        "returned",
        True,
        "X_JOB_TIMEOUT",
    )
    assert late == ["X_ABORTED"]
    assert await steps_of(driver, job_id) == []


async def test_a_body_that_swallows_the_cancel_and_returns_still_fails_the_attempt(
    caplog: pytest.LogCaptureFixture,
) -> None:
    driver, _ = frozen_driver()
    told: list[Settled[Any]] = []

    async def hook(s: Settled[Any]) -> None:
        told.append(s)

    async def returns_anyway(run: Run[Any]) -> str:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            pass
        return "too late"

    handle = _declare(returns_anyway, on_settled=hook)
    await enqueue(driver, handle)
    execution = await attempt(driver, handle)
    assert (execution.outcome, execution.code, execution.result) == (
        "retried",
        "X_JOB_TIMEOUT",
        None,
    )
    assert told == []
    [logged] = records(caplog, "jobs.timeout.abandoned")
    assert (logged.ended, logged.after_settle) == ("returned", False)  # type: ignore[attr-defined]


async def test_no_timeout_means_no_deadline() -> None:
    driver, _ = frozen_driver()

    async def patient(run: Run[Any]) -> str:
        await asyncio.sleep(0.05)
        return "ok"

    handle = _declare(patient, timeout=None)
    await enqueue(driver, handle)
    assert (await attempt(driver, handle)).outcome == "completed"


async def test_a_lost_lease_cancels_the_body_and_the_settle_is_unowned(
    caplog: pytest.LogCaptureFixture,
) -> None:
    driver, clock = frozen_driver()
    started = asyncio.Event()
    told: list[Settled[Any]] = []
    cancelled: list[str] = []

    async def hook(s: Settled[Any]) -> None:
        told.append(s)

    async def long(run: Run[Any]) -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(run.signal.reason.code)  # type: ignore[union-attr]
            raise

    handle = _declare(long, timeout=None, on_settled=hook, retry=Retry(attempts=1))
    job_id = await enqueue(driver, handle)
    claimed = await claim(driver)
    worker_signal = Signal()
    running = asyncio.create_task(
        execute_job(claimed, driver=driver, handle=handle, context=None, signal=worker_signal)
    )
    await started.wait()
    clock.advance(30_000)
    # The lease lapsed; another worker cannot re-take a final attempt, the claim buries it.
    await driver.claim(ClaimOptions(queues=["default"], limit=1, worker_id="w2"))
    worker_signal.abort(LeaseLostError("the heartbeat found another claim on the row"))
    execution = await running
    assert cancelled == ["X_JOB_LEASE_LOST"]
    assert execution.code == "X_JOB_LEASE_LOST"
    assert execution.settled is False
    assert execution.jobs_total is None
    assert told == []
    assert (await row(driver, job_id)).state == "dead"  # as the claim buried it, untouched
    assert len(records(caplog, "jobs.settle.unowned")) == 1


async def test_cancelling_the_caller_cancels_the_body() -> None:
    driver, _ = frozen_driver()
    started = asyncio.Event()
    stopped: list[bool] = []

    async def forever(run: Run[Any]) -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            stopped.append(True)
            raise

    handle = _declare(forever, timeout=None)
    await enqueue(driver, handle)
    claimed = await claim(driver)
    running = asyncio.create_task(execute_job(claimed, driver=driver, handle=handle, context=None))
    await started.wait()
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    await _until(lambda: stopped)
