"""The error decides too: terminal, retry-after, retryable and unclassified, and why a job
stopped is on the row and in the log."""

from __future__ import annotations

import logging
import random
from typing import Any

import pytest

from tests.support.execute import attempt, counts, enqueue, frozen_driver, records, row
from ujobs.errors import (
    OperationTimeoutError,
    OverloadedError,
    RateLimitedError,
    UltimateError,
    register_error_retry,
)
from ujobs.execution.run import Run
from ujobs.execution.settle import decide_failure, last_error_text
from ujobs.jobs.job import job
from ujobs.jobs.retry import Retry

register_error_retry({"X_TEST_FATAL": "terminal"})


def _failing(error: BaseException, retry: Retry) -> Any:
    async def failing(run: Run[Any]) -> None:
        raise error

    # Named after the function (not name=), so one test may declare it several times.
    return job(idempotency_key="k", tenant="none", retry=retry)(failing)


async def _one(error: BaseException, retry: Retry) -> tuple[Any, Any, Any]:
    driver, clock = frozen_driver()
    handle = _failing(error, retry)
    job_id = await enqueue(driver, handle)
    execution = await attempt(driver, handle)
    return execution, (await row(driver, job_id)), (driver, clock)


async def test_retry_after_waits_the_stated_time_clamped_by_max_delay() -> None:
    error = RateLimitedError("slow down", meta={"retryAfterSeconds": 120})
    execution, r, (driver, clock) = await _one(
        error, Retry(attempts=3, delay="1s", max_delay="60s", jitter=False)
    )
    assert execution.outcome == "retried"
    assert r.run_at_ms == clock.now_ms() + 60_000
    assert execution.resume_at_ms == r.run_at_ms
    assert r.attempt == 1  # still an attempt
    assert (await counts(driver, "failing"))["retried"] == 1


async def test_retry_after_within_max_delay_replaces_the_backoff() -> None:
    error = OverloadedError("busy", meta={"retryAfterSeconds": 5})
    _execution, r, (_, clock) = await _one(error, Retry(attempts=3, delay="1s", jitter=False))
    assert r.run_at_ms == clock.now_ms() + 5_000


async def test_retry_after_with_jitter_never_lands_before_the_stated_time() -> None:
    error = RateLimitedError("slow down", meta={"retryAfterSeconds": 10})
    _execution, r, (_, clock) = await _one(error, Retry(attempts=3))
    assert clock.now_ms() + 10_000 <= r.run_at_ms <= clock.now_ms() + 11_000


async def test_retry_after_with_no_stated_time_keeps_the_backoff() -> None:
    _execution, r, (_, clock) = await _one(
        RateLimitedError("slow down"), Retry(attempts=3, delay="2s", jitter=False)
    )
    assert r.run_at_ms == clock.now_ms() + 2_000


@pytest.mark.parametrize(
    "error",
    [
        OperationTimeoutError("upstream timed out"),  # retryable
        UltimateError("nobody classified this", code="X_SOMETHING_ELSE"),  # unclassified
        KeyError("not ours at all"),  # not an UltimateError
    ],
    ids=["retryable", "unclassified", "foreign"],
)
async def test_retryable_and_unclassified_keep_the_backoff_schedule(error: Exception) -> None:
    execution, r, (_, clock) = await _one(error, Retry(attempts=3, delay="3s", jitter=False))
    assert execution.outcome == "retried"
    assert execution.stop_reason is None
    assert r.run_at_ms == clock.now_ms() + 3_000


async def test_jobs_attempt_failed_carries_the_stop(caplog: pytest.LogCaptureFixture) -> None:
    await _one(ValueError("transient"), Retry(attempts=2, jitter=False))
    await _one(UltimateError("fatal", code="X_TEST_FATAL"), Retry(attempts=5))
    await _one(ValueError("last"), Retry(attempts=1))
    logged = records(caplog, "jobs.attempt.failed")
    assert [(r.stop, r.outcome, r.levelno) for r in logged] == [  # type: ignore[attr-defined]
        (None, "retried", logging.WARNING),
        ("terminal", "dead-lettered", logging.ERROR),
        ("attempts-exhausted", "dead-lettered", logging.ERROR),
    ]
    assert [r.code for r in logged] == ["ValueError", "X_TEST_FATAL", "ValueError"]  # type: ignore[attr-defined]


def test_decide_failure_is_the_one_table() -> None:
    policy = Retry(attempts=3, delay="1s", jitter=False)
    rng = random.Random(1)
    retried = decide_failure(ValueError("x"), retry=policy, attempt=1, now_ms=0, duration_ms=5)
    assert (retried.outcome, retried.stop, retried.resume_at_ms) == ("retried", None, 1_000)
    assert retried.options.count
    assert retried.options.duration_ms == 5
    second = decide_failure(ValueError("x"), retry=policy, attempt=2, now_ms=0, duration_ms=None)
    assert second.resume_at_ms == 2_000
    final = decide_failure(ValueError("x"), retry=policy, attempt=3, now_ms=0, duration_ms=None)
    assert (final.outcome, final.stop, final.options.dead_letter) == (
        "dead-lettered",
        "attempts-exhausted",
        True,
    )
    terminal = decide_failure(
        UltimateError("no", code="X_TEST_FATAL"),
        retry=policy,
        attempt=1,
        now_ms=0,
        duration_ms=None,
    )
    assert (terminal.outcome, terminal.stop, terminal.retry_class) == (
        "dead-lettered",
        "terminal",
        "terminal",
    )
    dropped = decide_failure(
        ValueError("x"),
        retry=Retry(attempts=1, dead_letter=False),
        attempt=1,
        now_ms=0,
        duration_ms=None,
    )
    assert (dropped.outcome, dropped.options.fail, dropped.options.count) == ("dropped", True, True)
    drained = decide_failure(
        ValueError("x"), retry=policy, attempt=3, now_ms=7, duration_ms=None, draining=True, rng=rng
    )
    assert (drained.outcome, drained.options.count, drained.resume_at_ms) == (
        "interrupted",
        False,
        7,
    )
    assert drained.last_error is None


def test_last_error_is_headline_then_verdict_then_stack_capped() -> None:
    try:
        raise UltimateError("x" * 20_000, code="X_BIG")
    except UltimateError as exc:
        text = last_error_text(exc, "stop: terminal")
    assert len(text) <= 8_000
    assert text.startswith("X_BIG: xxx")
