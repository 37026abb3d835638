"""Each counted failed attempt's error is kept with its row (the operator surface's attempt
history), not only the last: oldest first, the newest ``ATTEMPT_ERRORS_KEPT``, each cut to
``ATTEMPT_ERROR_CHARS``. A hand-back is not an attempt; a retry keeps the history."""

from __future__ import annotations

from tests.support.conformance import claim_one, req
from ujobs.clock import FrozenClock
from ujobs.drivers.base import (
    ATTEMPT_ERROR_CHARS,
    ATTEMPT_ERRORS_KEPT,
    AttemptError,
    JobDriver,
    JobIntrospection,
    NackOptions,
)


async def _fail(driver: JobDriver, clock: FrozenClock, error: str, **options: object) -> int:
    job = await claim_one(driver)
    clock.advance(1_000)
    assert await driver.nack(job.id, job.ref, NackOptions(error=error, **options))  # type: ignore[arg-type]
    return job.attempt


async def test_every_failed_attempt_keeps_its_own_error(
    driver: JobDriver, introspect: JobIntrospection, clock: FrozenClock
) -> None:
    job_id = (await driver.enqueue(req(max_attempts=5))).id
    first = await _fail(driver, clock, "X_A: first")
    first_at = clock.now_ms()
    second = await _fail(driver, clock, "X_B: second")
    assert await introspect.attempt_errors(job_id) == [
        AttemptError(attempt=first, error="X_A: first", at_ms=first_at),
        AttemptError(attempt=second, error="X_B: second", at_ms=clock.now_ms()),
    ]
    assert [first, second] == [1, 2]
    row = await introspect.get(job_id)
    assert row is not None
    assert row.last_error == "X_B: second"


async def test_a_hand_back_is_not_an_attempt_and_adds_no_error(
    driver: JobDriver, introspect: JobIntrospection, clock: FrozenClock
) -> None:
    job_id = (await driver.enqueue(req())).id
    await _fail(driver, clock, "X_DRAINING: handed back", count=False)
    assert await introspect.attempt_errors(job_id) == []


async def test_only_the_newest_are_kept_each_cut_to_its_length(
    driver: JobDriver, introspect: JobIntrospection, clock: FrozenClock
) -> None:
    job_id = (await driver.enqueue(req(max_attempts=ATTEMPT_ERRORS_KEPT + 5))).id
    for n in range(ATTEMPT_ERRORS_KEPT + 3):
        await _fail(driver, clock, f"X_N: {n} " + "x" * ATTEMPT_ERROR_CHARS)
    kept = await introspect.attempt_errors(job_id)
    assert [a.attempt for a in kept] == list(range(4, ATTEMPT_ERRORS_KEPT + 4))
    assert all(len(a.error) == ATTEMPT_ERROR_CHARS for a in kept)
    assert kept[-1].error.startswith(f"X_N: {ATTEMPT_ERRORS_KEPT + 2} ")


async def test_a_retried_job_keeps_its_earlier_attempts(
    driver: JobDriver, introspect: JobIntrospection, clock: FrozenClock
) -> None:
    job_id = (await driver.enqueue(req(max_attempts=1))).id
    await _fail(driver, clock, "X_A: before the retry", dead_letter=True)
    await introspect.requeue(job_id)
    await _fail(driver, clock, "X_B: after it", dead_letter=True)
    assert [(a.attempt, a.error) for a in await introspect.attempt_errors(job_id)] == [
        (1, "X_A: before the retry"),
        (1, "X_B: after it"),
    ]


async def test_an_unknown_id_has_no_history(introspect: JobIntrospection) -> None:
    assert await introspect.attempt_errors("no-such-job") == []
