"""Fleet slots: at most ``limit`` holders per key, in slot order, reclaimed by TTL; a run's
settle carrying its slot (``ack`` / ``nack`` ``slot``) frees exactly that holder's slot."""

from __future__ import annotations

import pytest

from tests.support.conformance import claim_one, req
from ujobs.clock import FrozenClock
from ujobs.drivers.base import JobDriver, LeaseStore, NackOptions, slot_holder


async def test_acquire_up_to_the_limit(leases: LeaseStore) -> None:
    assert await leases.acquire("job:sync", "w1", 2, 10_000)
    assert await leases.acquire("job:sync", "w2", 2, 10_000)
    assert not await leases.acquire("job:sync", "w3", 2, 10_000)
    assert await leases.holders("job:sync") == ["w1", "w2"]


async def test_keys_are_independent(leases: LeaseStore) -> None:
    assert await leases.acquire("job-key:sync:a", "w1", 1, 10_000)
    assert await leases.acquire("job-key:sync:b", "w2", 1, 10_000)
    assert not await leases.acquire("job-key:sync:a", "w2", 1, 10_000)
    assert await leases.holders("job-key:sync:a") == ["w1"]
    assert await leases.holders("job-key:sync:b") == ["w2"]
    assert await leases.holders("job-key:sync:c") == []


async def test_acquiring_twice_holds_one_slot(leases: LeaseStore) -> None:
    assert await leases.acquire("k", "w1", 2, 10_000)
    assert await leases.acquire("k", "w1", 2, 10_000)
    assert await leases.holders("k") == ["w1"]
    assert await leases.acquire("k", "w2", 2, 10_000)
    assert not await leases.acquire("k", "w3", 2, 10_000)


async def test_release_frees_the_slot_and_the_lowest_slot_is_taken_first(
    leases: LeaseStore,
) -> None:
    for holder in ("w1", "w2", "w3"):
        assert await leases.acquire("k", holder, 3, 10_000)
    await leases.release("k", "w1")
    assert await leases.holders("k") == ["w2", "w3"]
    assert await leases.acquire("k", "w4", 3, 10_000)
    assert await leases.holders("k") == ["w4", "w2", "w3"]
    await leases.release("k", "nobody")
    await leases.release("other", "w2")
    assert await leases.holders("k") == ["w4", "w2", "w3"]


async def test_a_lapsed_slot_is_reclaimed_without_cleanup(
    leases: LeaseStore, clock: FrozenClock
) -> None:
    assert await leases.acquire("k", "killed", 1, 5_000)
    clock.advance(4_999)
    assert not await leases.acquire("k", "w2", 1, 5_000)
    assert await leases.holders("k") == ["killed"]
    clock.advance(1)
    assert await leases.holders("k") == []
    assert await leases.acquire("k", "w2", 1, 5_000)
    assert await leases.holders("k") == ["w2"]
    assert not await leases.renew("k", "killed", 5_000), "its slot is gone"


async def test_renew_extends_the_slot(leases: LeaseStore, clock: FrozenClock) -> None:
    assert await leases.acquire("k", "w1", 1, 5_000)
    for _ in range(4):
        clock.advance(4_000)
        assert await leases.renew("k", "w1", 5_000)
    assert not await leases.acquire("k", "w2", 1, 5_000)
    clock.advance(5_000)
    assert not await leases.renew("k", "w1", 5_000)
    assert await leases.acquire("k", "w2", 1, 5_000)


async def test_renew_of_a_slot_never_held_or_released_is_false(leases: LeaseStore) -> None:
    assert not await leases.renew("k", "w1", 5_000)
    assert await leases.acquire("k", "w1", 1, 5_000)
    await leases.release("k", "w1")
    assert not await leases.renew("k", "w1", 5_000)


@pytest.mark.parametrize(
    "settle",
    ["ack", "retried", "dead", "handed-back", "suspended", "refused-by-the-row"],
)
async def test_a_settle_frees_its_runs_slot_and_no_other(
    driver: JobDriver, leases: LeaseStore, settle: str
) -> None:
    await driver.enqueue(req())
    job = await claim_one(driver, worker="w1")
    mine = slot_holder(job.id, job.ref)
    assert await leases.acquire("job-key:sync:a", mine, 2, 10_000)
    assert await leases.acquire("job-key:sync:a", "other#1@w2", 2, 10_000)
    assert await leases.acquire("job-key:sync:b", mine, 2, 10_000)
    slot = "job-key:sync:a"
    if settle == "ack":
        assert await driver.ack(job.id, job.ref, slot=slot)
    elif settle == "refused-by-the-row":
        assert await driver.ack(job.id, job.ref)
        assert not await driver.ack(job.id, job.ref, slot=slot), "the run is over either way"
    else:
        options = {
            "retried": NackOptions(error="x", run_at_ms=0),
            "dead": NackOptions(error="x", dead_letter=True),
            "handed-back": NackOptions(count=False),
            "suspended": NackOptions(park=True, count=False, run_at_ms=10**13),
        }[settle]
        assert await driver.nack(job.id, job.ref, options, slot=slot)
    assert await leases.holders("job-key:sync:a") == ["other#1@w2"]
    assert await leases.holders("job-key:sync:b") == [mine]
