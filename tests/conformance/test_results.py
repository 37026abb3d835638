"""Results: the ack stores the body's return value with the row in the same write; a result
wait is woken by the settle that finishes a row it marked (ujobs.drivers.results).

A wait's timeout here only bounds a hang: each wake asserted lands at once when it works, and
the test fails (never passes late) when it does not."""

from __future__ import annotations

import orjson
import pytest

from tests.support.conformance import claim_one, req
from ujobs.drivers.base import ClaimRef, JobDriver, NackOptions
from ujobs.drivers.results import JobResults, results_of, wait_settled
from ujobs.ids import new_id

HANG_S = 30.0


@pytest.fixture
def results(driver: JobDriver) -> JobResults:
    found = results_of(driver)
    if found is None:
        pytest.skip(f"driver {driver.name!r} has no result waits")
    return found


def encoded(value: object) -> str:
    return orjson.dumps(value).decode()


async def test_the_ack_stores_the_result_with_the_row(
    driver: JobDriver, results: JobResults
) -> None:
    value = {"total": 42, "items": ["a", "b"], "big": 2**60, "ratio": 0.5, "none": None}
    await driver.enqueue(req())
    job = await claim_one(driver)
    assert await driver.ack(job.id, job.ref, duration_ms=3, result=encoded(value))
    row = await results.read(job.id)
    assert row is not None
    assert (row.state, row.result) == ("done", value)


async def test_an_ack_without_a_result_stores_none(driver: JobDriver, results: JobResults) -> None:
    await driver.enqueue(req())
    job = await claim_one(driver)
    assert await driver.ack(job.id, job.ref)
    row = await results.read(job.id)
    assert row is not None
    assert (row.state, row.result) == ("done", None)


async def test_an_ack_that_lands_nothing_stores_nothing(
    driver: JobDriver, results: JobResults
) -> None:
    await driver.enqueue(req())
    job = await claim_one(driver, worker="w1")
    assert not await driver.ack(job.id, ClaimRef("w2", job.claim), result=encoded("forged"))
    row = await results.read(job.id)
    assert row is not None
    assert (row.state, row.result) == ("running", None)


async def test_an_unknown_id_reads_none(results: JobResults) -> None:
    assert await results.read(new_id()) is None
    assert await wait_settled(results, new_id(), 0) is None


async def test_the_ack_of_a_marked_row_wakes_its_wait(
    driver: JobDriver, results: JobResults
) -> None:
    await driver.enqueue(req())
    job = await claim_one(driver)
    async with results.listen(job.id) as ticket:
        row = await results.watch(job.id)
        assert row is not None
        assert row.state == "running"
        assert await driver.ack(job.id, job.ref, result=encoded([1, 2]))
        assert await ticket.wait(HANG_S), "the ack announced the marked row"
    row = await results.read(job.id)
    assert row is not None
    assert row.result == [1, 2]


async def test_a_dead_letter_of_a_marked_row_wakes_its_wait(
    driver: JobDriver, results: JobResults
) -> None:
    await driver.enqueue(req())
    job = await claim_one(driver)
    async with results.listen(job.id) as ticket:
        await results.watch(job.id)
        options = NackOptions(error="X_BOOM: no", dead_letter=True)
        assert await driver.nack(job.id, job.ref, options)
        assert await ticket.wait(HANG_S), "the dead-letter announced the marked row"
    row = await results.read(job.id)
    assert row is not None
    assert (row.state, row.result) == ("dead", None)


async def test_a_wait_answers_a_finished_row_at_once_and_a_live_one_when_time_is_up(
    driver: JobDriver, results: JobResults
) -> None:
    await driver.enqueue(req())
    job = await claim_one(driver)
    live = await wait_settled(results, job.id, 0)
    assert live is not None
    assert live.state == "running"
    assert await driver.ack(job.id, job.ref, result=encoded("ok"))
    done = await wait_settled(results, job.id, HANG_S)
    assert done is not None
    assert (done.state, done.result) == ("done", "ok")


async def test_a_requeue_clears_the_result_and_the_next_ack_writes_its_own(
    driver: JobDriver, results: JobResults
) -> None:
    introspect = driver.introspect
    if introspect is None:
        pytest.skip("requeue needs the operator surface")
    await driver.enqueue(req())
    job = await claim_one(driver)
    assert await driver.ack(job.id, job.ref, result=encoded({"run": 1}))
    await introspect.requeue(job.id)
    waiting = await results.read(job.id)
    assert waiting is not None
    assert (waiting.state, waiting.result) == ("ready", None)  # the old run's result is gone
    again = await claim_one(driver)
    assert await driver.ack(again.id, again.ref)
    row = await results.read(job.id)
    assert row is not None
    assert (row.state, row.result) == ("done", None)


async def test_a_cancel_of_a_marked_row_wakes_its_wait(
    driver: JobDriver, results: JobResults
) -> None:
    introspect = driver.introspect
    if introspect is None:
        pytest.skip("cancel needs the operator surface")
    await driver.enqueue(req())
    job = await claim_one(driver)
    async with results.listen(job.id) as ticket:
        await results.watch(job.id)
        await introspect.cancel(job.id, "not needed")
        assert await ticket.wait(HANG_S), "the cancel announced the marked row"
    row = await results.read(job.id)
    assert row is not None
    assert row.state == "cancelled"
