"""The driver answers the contract's shape: the Protocols, and capabilities by attribute."""

from __future__ import annotations

from ujobs.clock import FrozenClock
from ujobs.drivers.base import (
    BackfillLedger,
    ClaimOptions,
    EnqueueRequest,
    JobDriver,
    JobIntrospection,
    LeaseStore,
    StoreWatch,
    WorkerRegistry,
    capabilities_of,
)


async def test_the_driver_is_a_job_driver(driver: JobDriver, clock: FrozenClock) -> None:
    assert isinstance(driver, JobDriver)
    assert isinstance(driver.name, str)
    assert driver.name
    assert driver.clock is clock, "every time decision reads the injected clock"


async def test_each_capability_is_none_or_its_protocol(driver: JobDriver) -> None:
    caps = capabilities_of(driver)
    pairs: list[tuple[bool, object, type]] = [
        (caps.introspect, driver.introspect, JobIntrospection),
        (caps.leases, driver.leases, LeaseStore),
        (caps.workers, driver.workers, WorkerRegistry),
        (caps.backfills, driver.backfills, BackfillLedger),
    ]
    for present, surface, protocol in pairs:
        assert present == (surface is not None)
        if surface is not None:
            assert isinstance(surface, protocol)


async def test_a_claim_carries_the_keyspace_mark_exactly_when_the_driver_keeps_one(
    driver: JobDriver,
) -> None:
    """``store_watch`` (a store that can come back empty: Redis) stamps every claimed row with
    the mark it was claimed under, and that mark is the one ``verify`` reads; a driver without
    one stamps nothing."""
    await driver.enqueue(EnqueueRequest(name="n", input=1, idempotency_key="k"))
    [row] = await driver.claim(ClaimOptions(queues=["default"], limit=1, worker_id="w"))
    watch = driver.store_watch
    if watch is None:
        assert row.store_epoch is None
        return
    assert isinstance(watch, StoreWatch)
    assert row.store_epoch is not None
    assert watch.epoch == row.store_epoch
    assert await watch.verify() == row.store_epoch


async def test_a_fresh_driver_is_empty(driver: JobDriver) -> None:
    stats = await driver.stats()
    assert all(
        q.ready == q.delayed == q.running == q.suspended == q.done == q.dead == 0
        for q in stats.queues.values()
    )
