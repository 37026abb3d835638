"""Counters move in the statement that settles the row; the rollup folds them by tier."""

from __future__ import annotations

from tests.support.conformance import claim, claim_one, req
from ujobs.clock import FrozenClock
from ujobs.drivers.base import (
    COUNTER_TIERS,
    CounterTotals,
    JobDriver,
    JobIntrospection,
    NackOptions,
)

MINUTE, FIVE_MINUTES, HOUR = (tier[0] for tier in COUNTER_TIERS)
DAY = 86_400_000
NEVER = 10**13  # a run_at no test reaches


async def _settle(driver: JobDriver, name: str, options: NackOptions | None) -> None:
    await driver.enqueue(req(name))
    job = await claim_one(driver)
    if options is None:
        assert await driver.ack(job.id, job.ref, duration_ms=100)
    else:
        assert await driver.nack(job.id, job.ref, options)
    # a row left ready by a retry or suspended by a park must not be claimed by the next call
    await _park_leftovers(driver)


async def _park_leftovers(driver: JobDriver) -> None:
    for job in await claim(driver, limit=10):
        await driver.nack(job.id, job.ref, NackOptions(park=True, count=False, run_at_ms=NEVER))


async def test_settles_move_their_counters(
    driver: JobDriver, introspect: JobIntrospection, clock: FrozenClock
) -> None:
    await _settle(driver, "a", None)
    await _settle(driver, "a", None)
    await _settle(driver, "a", NackOptions(error="x", duration_ms=7))  # retried
    await _settle(driver, "a", NackOptions(error="x", fail=True, duration_ms=3))
    await _settle(driver, "a", NackOptions(error="x", dead_letter=True))
    await _settle(driver, "a", NackOptions(error="busy", fail=True, count=False))  # a refusal
    await _settle(driver, "b", None)
    totals = await introspect.counter_totals(clock.now_ms() - MINUTE)
    assert totals == [
        CounterTotals(job="a", done=2, retried=1, failed=2, dead=1, duration_ms=200),
        CounterTotals(job="b", done=1, retried=0, failed=0, dead=0, duration_ms=100),
    ]
    [bucket] = await introspect.counters("a", clock.now_ms() - MINUTE)
    assert bucket.bucket_start_ms == clock.now_ms() - clock.now_ms() % MINUTE
    assert bucket.width_ms == MINUTE
    assert (bucket.done, bucket.retried, bucket.failed, bucket.dead) == (2, 1, 2, 1)


async def test_uncounted_hand_backs_move_nothing(
    driver: JobDriver, introspect: JobIntrospection
) -> None:
    await driver.enqueue(req("a"))
    job = await claim_one(driver)
    await driver.nack(job.id, job.ref, NackOptions(count=False))  # a shed or a drain
    job = await claim_one(driver)
    await driver.nack(job.id, job.ref, NackOptions(park=True, count=False, run_at_ms=NEVER))
    assert await introspect.counter_totals(0) == []
    assert await introspect.counters("a", 0) == []


async def test_a_settle_that_did_not_land_moves_nothing(
    driver: JobDriver, introspect: JobIntrospection, clock: FrozenClock
) -> None:
    await driver.enqueue(req("a"))
    old = await claim_one(driver, visibility_ms=1_000)
    clock.advance(1_000)
    new = await claim_one(driver)
    assert not await driver.ack(old.id, old.ref, duration_ms=5)
    assert not await driver.nack(old.id, old.ref, NackOptions(error="x", dead_letter=True))
    assert await introspect.counter_totals(0) == []
    assert await driver.ack(new.id, new.ref)
    [totals] = await introspect.counter_totals(0)
    assert (totals.done, totals.dead) == (1, 0)


async def test_buckets_are_per_minute_and_since_filters_them(
    driver: JobDriver, introspect: JobIntrospection, clock: FrozenClock
) -> None:
    await _settle(driver, "a", None)
    first_bucket = clock.now_ms() - clock.now_ms() % MINUTE
    clock.advance(MINUTE)
    await _settle(driver, "a", None)
    await _settle(driver, "a", None)
    buckets = await introspect.counters("a", 0)
    assert [(b.bucket_start_ms, b.done) for b in buckets] == [
        (first_bucket, 1),
        (first_bucket + MINUTE, 2),
    ]
    recent = await introspect.counters("a", first_bucket + MINUTE)
    assert [b.done for b in recent] == [2]
    [totals] = await introspect.counter_totals(first_bucket + MINUTE)
    assert totals.done == 2
    assert await introspect.counters("nobody", 0) == []


async def test_rollup_folds_by_tier_and_is_idempotent(
    driver: JobDriver, introspect: JobIntrospection, clock: FrozenClock
) -> None:
    for _ in range(3):
        await _settle(driver, "a", None)
        clock.advance(MINUTE)
    assert len(await introspect.counters("a", 0)) == 3
    assert await introspect.rollup_counters() == 0, "nothing is past its tier yet"

    clock.advance(DAY)
    assert await introspect.rollup_counters() == 3
    assert await introspect.rollup_counters() == 0
    folded = await introspect.counters("a", 0)
    assert {b.width_ms for b in folded} == {FIVE_MINUTES}
    assert sum(b.done for b in folded) == 3
    assert all(b.bucket_start_ms % FIVE_MINUTES == 0 for b in folded)

    clock.advance(7 * DAY)
    assert await introspect.rollup_counters() == len(folded)
    hourly = await introspect.counters("a", 0)
    assert {b.width_ms for b in hourly} == {HOUR}
    assert sum(b.done for b in hourly) == 3
    [totals] = await introspect.counter_totals(0)
    assert (totals.done, totals.duration_ms) == (3, 300)

    clock.advance(30 * DAY)
    assert await introspect.rollup_counters() == len(hourly)
    assert await introspect.counters("a", 0) == []
    assert await introspect.rollup_counters() == 0
