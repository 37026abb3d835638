"""Claim: due rows only, oldest first, up to the limit, invisible while leased, and the
final-attempt burial of a row whose every worker died."""

from __future__ import annotations

import pytest

from tests.support.conformance import (
    ExhaustedLog,
    claim,
    claim_one,
    queue_stats,
    req,
)
from ujobs.clock import FrozenClock
from ujobs.drivers.base import (
    LEASE_LAPSED_FINAL_ATTEMPT,
    ClaimOptions,
    JobDriver,
    JobIntrospection,
)
from ujobs.errors import ClaimQueuesEmptyError, InvariantError


async def test_a_delayed_row_waits_for_its_run_at(driver: JobDriver, clock: FrozenClock) -> None:
    enq = await driver.enqueue(req(run_at_ms=clock.now_ms() + 5_000))
    stats = await queue_stats(driver)
    assert (stats.delayed, stats.ready, stats.due) == (1, 0, 0)
    assert await claim(driver) == []
    clock.advance(4_999)
    assert await claim(driver) == []
    clock.advance(1)
    job = await claim_one(driver)
    assert job.id == enq.id
    assert job.attempt == 1


async def test_a_run_at_in_the_past_is_due_at_once(driver: JobDriver, clock: FrozenClock) -> None:
    enq = await driver.enqueue(req(run_at_ms=clock.now_ms() - 5_000))
    assert (await claim_one(driver)).id == enq.id


async def test_claim_hands_out_the_oldest_due_first(driver: JobDriver, clock: FrozenClock) -> None:
    late = await driver.enqueue(req(run_at_ms=clock.now_ms() + 3_000))
    mid = await driver.enqueue(req(run_at_ms=clock.now_ms() + 1_000))
    now = await driver.enqueue(req())
    clock.advance(3_000)
    got = await claim(driver, limit=10)
    assert [j.id for j in got] == [now.id, mid.id, late.id]


async def test_equal_run_at_goes_in_enqueue_order(driver: JobDriver) -> None:
    ids = [(await driver.enqueue(req())).id for _ in range(5)]
    first = await claim(driver, limit=2)
    rest = await claim(driver, limit=10)
    assert [j.id for j in first] == ids[:2]
    assert [j.id for j in rest] == ids[2:]


async def test_claim_respects_its_limit(driver: JobDriver) -> None:
    await driver.enqueue_many([req() for _ in range(7)])
    assert len(await claim(driver, limit=3)) == 3
    assert len(await claim(driver, limit=3)) == 3
    assert len(await claim(driver, limit=3)) == 1
    assert await claim(driver, limit=3) == []


async def test_claim_reads_only_its_queues(driver: JobDriver) -> None:
    a = await driver.enqueue(req(queue="a"))
    b = await driver.enqueue(req(queue="b"))
    c = await driver.enqueue(req(queue="c"))
    got = await claim(driver, "a", "c", limit=10)
    assert {j.id for j in got} == {a.id, c.id}
    assert [j.id for j in await claim(driver, "b")] == [b.id]


async def test_claim_needs_a_queue(driver: JobDriver) -> None:
    with pytest.raises(ClaimQueuesEmptyError) as caught:
        await driver.claim(ClaimOptions(queues=[], limit=1, worker_id="w1"))
    assert caught.value.code == "X_JOB_CLAIM_QUEUES_EMPTY"


@pytest.mark.parametrize(("limit", "visibility_ms"), [(0, 1_000), (1, 0)])
async def test_a_claim_of_nothing_is_refused(
    driver: JobDriver, limit: int, visibility_ms: int
) -> None:
    with pytest.raises(InvariantError) as caught:
        await driver.claim(
            ClaimOptions(
                queues=["default"], limit=limit, worker_id="w1", visibility_ms=visibility_ms
            )
        )
    assert caught.value.code == "X_INVARIANT"


async def test_a_claim_leases_the_row(driver: JobDriver, clock: FrozenClock) -> None:
    await driver.enqueue(req())
    job = await claim_one(driver, worker="w1", visibility_ms=10_000)
    assert job.worker_id == "w1"
    assert job.ref.worker_id == "w1"
    assert job.ref.claim == job.claim
    assert job.lease_expires_at_ms == clock.now_ms() + 10_000
    stats = await queue_stats(driver)
    assert (stats.running, stats.ready, stats.due) == (1, 0, 0)


async def test_a_leased_row_is_invisible_until_the_lease_lapses(
    driver: JobDriver, clock: FrozenClock
) -> None:
    await driver.enqueue(req())
    first = await claim_one(driver, worker="w1", visibility_ms=10_000)
    assert await claim(driver, worker="w2") == []
    clock.advance(9_999)
    assert await claim(driver, worker="w2") == []
    clock.advance(1)
    again = await claim_one(driver, worker="w2")
    assert again.id == first.id
    assert again.run_id == first.run_id
    assert again.attempt == first.attempt + 1
    assert again.worker_id == "w2"
    assert again.ref != first.ref


async def test_redelivery_counts_every_claim(driver: JobDriver, clock: FrozenClock) -> None:
    await driver.enqueue(req(max_attempts=5))
    attempts = []
    for _ in range(3):
        job = await claim_one(driver, visibility_ms=1_000)
        attempts.append(job.attempt)
        clock.advance(1_000)
    assert attempts == [1, 2, 3]


async def test_a_lapsed_final_attempt_is_buried_dead(driver: JobDriver, clock: FrozenClock) -> None:
    enq = await driver.enqueue(req("crashy", key="c", max_attempts=2, input={"a": 1}))
    log = ExhaustedLog()
    for attempt in (1, 2):
        job = await claim_one(driver, visibility_ms=1_000, on_exhausted=log)
        assert job.attempt == attempt
        clock.advance(1_000)
    assert await claim(driver, visibility_ms=1_000, on_exhausted=log) == []
    assert len(log.calls) == 1
    [buried] = log.calls[0]
    assert buried.id == enq.id
    assert buried.run_id == enq.run_id
    assert buried.name == "crashy"
    assert buried.queue == "default"
    assert buried.input == {"a": 1}
    assert (buried.attempt, buried.max_attempts) == (2, 2)
    assert buried.state == "dead"
    assert buried.last_error == LEASE_LAPSED_FINAL_ATTEMPT
    stats = await queue_stats(driver)
    assert (stats.dead, stats.running) == (1, 0)
    clock.advance(60_000)
    assert await claim(driver, on_exhausted=log) == []
    assert len(log.calls) == 1, "a buried row is reported once"
    assert not (await driver.enqueue(req("crashy", key="c"))).deduped, "the key is free"


async def test_a_buried_row_shows_why(
    driver: JobDriver, introspect: JobIntrospection, clock: FrozenClock
) -> None:
    enq = await driver.enqueue(req(max_attempts=1))
    await claim_one(driver, visibility_ms=1_000)
    clock.advance(1_000)
    assert await claim(driver) == []
    row = await introspect.get(enq.id)
    assert row is not None
    assert row.state == "dead"
    assert row.last_error == LEASE_LAPSED_FINAL_ATTEMPT
    assert row.attempt == 1
    [totals] = await introspect.counter_totals(0)
    assert (totals.job, totals.dead, totals.failed) == ("send-email", 1, 0)


async def test_drop_exhausted_buries_failed(driver: JobDriver, clock: FrozenClock) -> None:
    kept = await driver.enqueue(req("kept", max_attempts=1))
    dropped = await driver.enqueue(req("dropped", max_attempts=1))
    await claim(driver, visibility_ms=1_000, limit=10)
    clock.advance(1_000)
    log = ExhaustedLog()
    got = await claim(driver, on_exhausted=log, drop_exhausted=frozenset({"dropped"}))
    assert got == []
    assert len(log.calls) == 1
    states = {row.id: row.state for row in log.calls[0]}
    assert states == {kept.id: "dead", dropped.id: "failed"}
    stats = await queue_stats(driver)
    assert (stats.dead, stats.failed) == (1, 1)


async def test_burial_without_a_listener_still_buries(
    driver: JobDriver, clock: FrozenClock
) -> None:
    await driver.enqueue(req(max_attempts=1))
    await claim_one(driver, visibility_ms=1_000)
    clock.advance(1_000)
    assert await claim(driver) == []
    assert (await queue_stats(driver)).dead == 1


async def test_a_burial_pass_still_hands_out_due_rows(
    driver: JobDriver, clock: FrozenClock
) -> None:
    crashy = await driver.enqueue(req(max_attempts=1))
    await claim_one(driver, visibility_ms=1_000)
    clock.advance(1_000)
    fresh = await driver.enqueue(req())
    log = ExhaustedLog()
    got = await claim(driver, on_exhausted=log)
    assert [j.id for j in got] == [fresh.id]
    assert [r.id for r in log.calls[0]] == [crashy.id]


async def test_a_lapsed_row_short_of_its_final_attempt_is_redelivered(
    driver: JobDriver, clock: FrozenClock
) -> None:
    await driver.enqueue(req(max_attempts=2))
    await claim_one(driver, visibility_ms=1_000)
    clock.advance(1_000)
    log = ExhaustedLog()
    job = await claim_one(driver, on_exhausted=log)
    assert job.attempt == 2
    assert log.calls == []


async def test_a_paused_queue_is_claimed_by_nobody(
    driver: JobDriver, introspect: JobIntrospection
) -> None:
    await introspect.pause_queue("slow")
    assert await introspect.paused_queues() == ["slow"]
    paused = await driver.enqueue(req(queue="slow"))
    assert not paused.deduped, "an enqueue still lands"
    other = await driver.enqueue(req(queue="fast"))
    got = await claim(driver, "slow", "fast", limit=10)
    assert [j.id for j in got] == [other.id]
    stats = await queue_stats(driver, "slow")
    assert (stats.ready, stats.paused) == (1, True)
    await introspect.resume_queue("slow")
    assert await introspect.paused_queues() == []
    assert [j.id for j in await claim(driver, "slow")] == [paused.id]
    assert not (await queue_stats(driver, "slow")).paused


async def test_pausing_twice_and_resuming_an_unpaused_queue_are_harmless(
    introspect: JobIntrospection,
) -> None:
    await introspect.pause_queue("q")
    await introspect.pause_queue("q")
    await introspect.resume_queue("never-paused")
    assert await introspect.paused_queues() == ["q"]
    await introspect.resume_queue("q")
    assert await introspect.paused_queues() == []


async def test_stats_count_rows_per_queue_and_state(driver: JobDriver, clock: FrozenClock) -> None:
    await driver.enqueue_many([req(queue="a"), req(queue="a"), req(queue="b")])
    await driver.enqueue(req(queue="a", run_at_ms=clock.now_ms() + 1_000))
    await claim_one(driver, "a")
    stats = await driver.stats()
    a, b = stats.queues["a"], stats.queues["b"]
    assert (a.ready, a.delayed, a.running, a.due) == (1, 1, 1, 1)
    assert a.oldest_due_run_at_ms == clock.now_ms()
    assert (b.ready, b.due) == (1, 1)
