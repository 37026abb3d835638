"""A snoozing nack (``NackOptions(snooze=True)``) hands the attempt back like any uncounted
nack and adds one to the run's ``snoozes``, which the next claim carries; an operator's requeue
starts it again at zero."""

from __future__ import annotations

from tests.support.conformance import claim_one, req
from ujobs.clock import FrozenClock
from ujobs.drivers.base import JobDriver, JobIntrospection, NackOptions


async def test_snoozes_count_on_the_row_and_reach_the_next_claim(
    driver: JobDriver, clock: FrozenClock
) -> None:
    await driver.enqueue(req())
    first = await claim_one(driver)
    assert (first.attempt, first.snoozes) == (1, 0)
    for n in (1, 2):
        job = await claim_one(driver) if n > 1 else first
        due = clock.now_ms() + 1_000
        assert await driver.nack(
            job.id, job.ref, NackOptions(count=False, run_at_ms=due, snooze=True)
        )
        clock.advance(1_000)
    again = await claim_one(driver)
    assert (again.attempt, again.snoozes) == (1, 2)
    # An ordinary hand-back is no snooze.
    assert await driver.nack(again.id, again.ref, NackOptions(count=False))
    assert (await claim_one(driver)).snoozes == 2


async def test_a_requeue_starts_the_snoozes_again(
    driver: JobDriver, introspect: JobIntrospection, clock: FrozenClock
) -> None:
    job_id = (await driver.enqueue(req(max_attempts=1))).id
    job = await claim_one(driver)
    assert await driver.nack(job.id, job.ref, NackOptions(count=False, snooze=True))
    job = await claim_one(driver)
    assert job.snoozes == 1
    assert await driver.nack(job.id, job.ref, NackOptions(error="X_A: no", dead_letter=True))
    await introspect.requeue(job_id)
    assert (await claim_one(driver)).snoozes == 0
