"""The Redis driver's keyspace mark (``{prefix}:store``): every claim stamps its rows with it,
and a keyspace wiped under a live driver shows as a new mark, never as the old one again."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from redis.asyncio import Redis

from tests.support.redis_keys import drop_prefix, redis_test_driver
from ujobs.clock import FrozenClock
from ujobs.drivers.base import ClaimOptions, EnqueueRequest, JobDriver, StoreWatch
from ujobs.drivers.memory import memory_driver
from ujobs.drivers.redis import RedisDriver, redis_driver
from ujobs.drivers.redis.mark import KeyspaceMark


@pytest.fixture
async def driver(redis_url: str, redis_prefix: str) -> AsyncIterator[RedisDriver]:
    async with redis_test_driver(redis_url, redis_prefix, clock=FrozenClock()) as drv:
        yield drv


async def claim_one(driver: JobDriver, key: str) -> str | None:
    await driver.enqueue(EnqueueRequest(name="n", input=1, idempotency_key=key))
    [job] = await driver.claim(ClaimOptions(queues=["default"], limit=1, worker_id="w"))
    return job.store_epoch


async def test_a_claim_writes_the_mark_and_stamps_its_rows(driver: RedisDriver) -> None:
    watch = driver.store_watch
    assert isinstance(watch, StoreWatch)
    assert watch.prefix == driver.prefix
    assert [watch.epoch] == [None]  # no claim yet
    epoch = await claim_one(driver, "a")
    assert epoch is not None
    assert watch.epoch == epoch
    assert await driver.client.get(f"{{{driver.prefix}}}:store") == epoch.encode()
    assert await claim_one(driver, "b") == epoch  # the mark stays while the keyspace does
    assert await watch.verify() == epoch


async def test_a_wiped_keyspace_shows_as_a_new_mark(driver: RedisDriver) -> None:
    epoch = await claim_one(driver, "a")
    await drop_prefix(driver.client, driver.prefix)  # what a restart without persistence does
    fresh = await driver.store_watch.verify()
    assert fresh != epoch
    assert driver.store_watch.epoch == fresh
    assert await claim_one(driver, "b") == fresh
    # The driver that wrote the first mark never writes that token again.
    await drop_prefix(driver.client, driver.prefix)
    assert await claim_one(driver, "c") not in (epoch, fresh)


async def test_every_process_of_the_deployment_reads_one_mark(
    driver: RedisDriver, redis_url: str
) -> None:
    epoch = await claim_one(driver, "a")
    client = Redis.from_url(redis_url)
    other = redis_driver(client, prefix=driver.prefix, clock=FrozenClock())
    try:
        assert await other.store_watch.verify() == epoch
        await drop_prefix(client, driver.prefix)
        rewritten = await other.store_watch.verify()  # the other process writes the new mark
        assert rewritten != epoch
        assert await driver.store_watch.verify() == rewritten
    finally:
        await other.close()
        await client.aclose()


async def test_verifies_on_the_wire_together_share_one_read() -> None:
    calls: list[list[Any]] = []
    release = asyncio.Event()

    async def run(operation: str, args: list[Any]) -> bytes:
        calls.append([operation, *args])
        await release.wait()
        return b"m1"

    mark = KeyspaceMark(run, "p")
    waiting = [asyncio.ensure_future(mark.verify()) for _ in range(20)]
    await asyncio.sleep(0)
    release.set()
    assert await asyncio.gather(*waiting) == ["m1"] * 20
    assert len(calls) == 1
    assert calls[0][0] == "mark"
    assert await mark.verify() == "m1"  # the next one reads again
    assert len(calls) == 2
    assert calls[0][1] != calls[1][1]  # a fresh candidate token each time


def test_a_store_that_keeps_its_keyspace_has_no_watch() -> None:
    driver = memory_driver(clock=FrozenClock())
    assert driver.store_watch is None
