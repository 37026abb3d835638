"""Settles and renewals: fenced on the CLAIM, answering whether they landed; nack targets and
attempt counting; the heartbeat's three answers."""

from __future__ import annotations

import pytest

from tests.support.conformance import claim, claim_one, queue_stats, req
from ujobs.clock import FrozenClock
from ujobs.drivers.base import ClaimRef, JobDriver, JobIntrospection, NackOptions, claim_of
from ujobs.ids import new_id


async def test_ack_settles_done_once(driver: JobDriver) -> None:
    await driver.enqueue(req())
    job = await claim_one(driver)
    assert claim_of(job) == job.ref
    assert await driver.ack(job.id, job.ref, duration_ms=12)
    assert not await driver.ack(job.id, job.ref), "a second ack matches nothing"
    assert not await driver.nack(job.id, job.ref, NackOptions(error="late"))
    stats = await queue_stats(driver)
    assert (stats.done, stats.running) == (1, 0)
    assert await claim(driver) == []


async def test_settles_of_another_workers_claim_answer_false(
    driver: JobDriver, clock: FrozenClock
) -> None:
    await driver.enqueue(req())
    old = await claim_one(driver, worker="w1", visibility_ms=1_000)
    clock.advance(1_000)
    new = await claim_one(driver, worker="w2")
    assert not await driver.ack(old.id, old.ref)
    assert not await driver.nack(old.id, old.ref, NackOptions(error="x", dead_letter=True))
    assert await driver.heartbeat(old.id, old.ref, 1_000) == "lost"
    assert (await queue_stats(driver)).running == 1
    assert await driver.ack(new.id, new.ref)


async def test_settles_of_the_same_workers_older_claim_answer_false(
    driver: JobDriver, clock: FrozenClock
) -> None:
    await driver.enqueue(req())
    old = await claim_one(driver, worker="w1", visibility_ms=1_000)
    clock.advance(1_000)
    new = await claim_one(driver, worker="w1")
    assert new.worker_id == old.worker_id
    assert new.ref != old.ref
    assert not await driver.ack(old.id, old.ref)
    assert not await driver.nack(old.id, old.ref, NackOptions(error="x"))
    assert await driver.heartbeat(old.id, old.ref, 1_000) == "lost"
    assert await driver.ack(new.id, new.ref)


async def test_a_forged_ref_answers_false(driver: JobDriver) -> None:
    await driver.enqueue(req())
    job = await claim_one(driver, worker="w1")
    assert not await driver.ack(job.id, ClaimRef("w2", job.claim))
    assert not await driver.ack(job.id, ClaimRef("w1", job.claim + 1))
    assert not await driver.ack(new_id(), job.ref), "an id nobody queued"
    assert await driver.ack(job.id, job.ref)


async def test_settling_a_lapsed_but_unclaimed_row_still_lands(
    driver: JobDriver, clock: FrozenClock
) -> None:
    """A lapsed lease is only lost once another claim takes the row."""
    await driver.enqueue(req())
    job = await claim_one(driver, visibility_ms=1_000)
    clock.advance(5_000)
    assert await driver.ack(job.id, job.ref)
    assert await claim(driver) == []


async def test_nack_retry_waits_for_its_run_at(driver: JobDriver, clock: FrozenClock) -> None:
    await driver.enqueue(req(max_attempts=3))
    job = await claim_one(driver)
    assert await driver.nack(
        job.id, job.ref, NackOptions(error="flaky", run_at_ms=clock.now_ms() + 2_000)
    )
    stats = await queue_stats(driver)
    assert (stats.ready, stats.running, stats.due) == (1, 0, 0)
    assert await claim(driver) == []
    clock.advance(2_000)
    again = await claim_one(driver)
    assert again.id == job.id
    assert again.attempt == 2


async def test_nack_without_run_at_is_due_now(driver: JobDriver) -> None:
    await driver.enqueue(req())
    job = await claim_one(driver)
    assert await driver.nack(job.id, job.ref, NackOptions(error="flaky"))
    assert (await claim_one(driver)).attempt == 2


async def test_an_uncounted_nack_presents_the_same_attempt_again(driver: JobDriver) -> None:
    await driver.enqueue(req(max_attempts=2))
    job = await claim_one(driver)
    assert job.attempt == 1
    assert await driver.nack(job.id, job.ref, NackOptions(count=False))
    again = await claim_one(driver)
    assert again.attempt == 1
    assert await driver.nack(again.id, again.ref, NackOptions(error="real"))
    assert (await claim_one(driver)).attempt == 2


async def test_an_outage_hand_back_lands_up_to_its_cap_then_changes_nothing(
    driver: JobDriver, clock: FrozenClock
) -> None:
    """``unreachable_cap``: an uncounted hand-back fenced on the row's outage tally, which it
    adds one to; at the cap it answers False and leaves the row running under its claim."""
    await driver.enqueue(req(max_attempts=2))
    other = await driver.enqueue(req(key="other"))
    outage = NackOptions(count=False, run_at_ms=clock.now_ms(), unreachable_cap=2)
    for _ in range(2):
        job = await claim_one(driver)
        assert job.attempt == 1
        assert await driver.nack(job.id, job.ref, outage)
    job = await claim_one(driver)
    assert job.attempt == 1
    assert not await driver.nack(job.id, job.ref, outage)
    assert (await queue_stats(driver)).running == 1, "refused: still running under its claim"
    assert await driver.heartbeat(job.id, job.ref, 1_000) == "renewed"
    assert await driver.nack(job.id, job.ref, NackOptions(error="counted", run_at_ms=0))
    assert (await claim_one(driver)).attempt == 2
    fresh = await claim_one(driver)
    assert fresh.id == other.id, "the tally is the row's own"
    assert await driver.nack(fresh.id, fresh.ref, outage)


async def test_park_suspends_until_run_at_without_burning_an_attempt(
    driver: JobDriver, clock: FrozenClock
) -> None:
    await driver.enqueue(req(max_attempts=1))
    job = await claim_one(driver)
    wake = clock.now_ms() + 86_400_000
    assert await driver.nack(job.id, job.ref, NackOptions(park=True, count=False, run_at_ms=wake))
    stats = await queue_stats(driver)
    assert (stats.suspended, stats.running, stats.due) == (1, 0, 0)
    assert await claim(driver) == []
    clock.set(wake)
    resumed = await claim_one(driver)
    assert resumed.id == job.id
    assert resumed.run_id == job.run_id
    assert resumed.attempt == 1, "a suspension burns no attempt"
    assert await driver.ack(resumed.id, resumed.ref)


async def test_a_suspended_row_still_holds_its_key(driver: JobDriver, clock: FrozenClock) -> None:
    enq = await driver.enqueue(req(key="k"))
    job = await claim_one(driver)
    await driver.nack(
        job.id, job.ref, NackOptions(park=True, count=False, run_at_ms=clock.now_ms() + 1)
    )
    assert (await driver.enqueue(req(key="k"))).id == enq.id


@pytest.mark.parametrize(
    ("options", "state"),
    [
        (NackOptions(error="bad", dead_letter=True), "dead"),
        (NackOptions(error="bad", fail=True), "failed"),
        (NackOptions(error="busy", fail=True, count=False), "failed"),
    ],
)
async def test_terminal_nacks_finish_the_row_and_free_its_key(
    driver: JobDriver, options: NackOptions, state: str
) -> None:
    first = await driver.enqueue(req(key="k"))
    job = await claim_one(driver)
    assert await driver.nack(job.id, job.ref, options)
    stats = await queue_stats(driver)
    assert getattr(stats, state) == 1
    assert stats.running == 0
    assert await claim(driver) == []
    fresh = await driver.enqueue(req(key="k"))
    assert not fresh.deduped
    assert fresh.id != first.id


async def test_nack_records_the_error(driver: JobDriver, introspect: JobIntrospection) -> None:
    enq = await driver.enqueue(req())
    job = await claim_one(driver)
    await driver.nack(job.id, job.ref, NackOptions(error="X_TIMEOUT: too slow"))
    row = await introspect.get(enq.id)
    assert row is not None
    assert (row.state, row.last_error, row.attempt) == ("ready", "X_TIMEOUT: too slow", 1)
    again = await claim_one(driver)
    await driver.nack(again.id, again.ref, NackOptions(error="gave up", dead_letter=True))
    row = await introspect.get(enq.id)
    assert row is not None
    assert (row.state, row.last_error, row.attempt) == ("dead", "gave up", 2)
    assert row.finished_at_ms is not None


async def test_heartbeat_renews_the_lease(driver: JobDriver, clock: FrozenClock) -> None:
    await driver.enqueue(req())
    job = await claim_one(driver, worker="w1", visibility_ms=1_000)
    for _ in range(5):
        clock.advance(900)
        assert await driver.heartbeat(job.id, job.ref, 1_000) == "renewed"
        assert await claim(driver, worker="w2") == []
    clock.advance(999)
    assert await claim(driver, worker="w2") == []
    clock.advance(1)
    assert (await claim_one(driver, worker="w2")).attempt == 2


async def test_heartbeat_on_a_settled_or_unknown_row_is_lost(driver: JobDriver) -> None:
    await driver.enqueue(req())
    job = await claim_one(driver)
    assert await driver.ack(job.id, job.ref)
    assert await driver.heartbeat(job.id, job.ref, 1_000) == "lost"
    assert await driver.heartbeat(new_id(), job.ref, 1_000) == "lost"


async def test_heartbeat_after_cancel_answers_cancelled(
    driver: JobDriver, introspect: JobIntrospection
) -> None:
    enq = await driver.enqueue(req())
    job = await claim_one(driver)
    cancelled = await introspect.cancel(enq.id, "runaway")
    assert cancelled is not None
    assert cancelled.state == "cancelled"
    assert await driver.heartbeat(job.id, job.ref, 1_000) == "cancelled"
    assert not await driver.ack(job.id, job.ref), "the cancelled worker cannot un-cancel it"
    assert not await driver.nack(job.id, job.ref, NackOptions(error="aborted"))
    row = await introspect.get(enq.id)
    assert row is not None
    assert row.state == "cancelled"
    assert await claim(driver) == []
