"""The Redis driver's own announce (``wake_channel=``): the enqueue script PUBLISHes the queue
name, once per queue per slot of the driver's clock, only for rows it inserted due soon — and
an idle worker on another driver instance starts the job from that announce alone."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from redis.asyncio import Redis

from tests.support.redis_keys import redis_test_driver
from tests.support.wake import WAIT_S
from tests.support.worker import declare, registry_of
from ujobs.clock import SYSTEM_CLOCK, FrozenClock
from ujobs.drivers.base import EnqueueRequest
from ujobs.drivers.redis.driver import DEFAULT_WAKE_SLOT_MS, RedisDriver, redis_driver
from ujobs.errors import ConfigInvalidError
from ujobs.execution.run import Run
from ujobs.lifecycle import Lifecycle
from ujobs.metrics import JobMetrics
from ujobs.wake.listener import redis_wake
from ujobs.wake.protocol import WAKE_DUE_WITHIN_MS
from ujobs.worker import job_worker

MINUTE_MS = 60_000


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock(1_700_000_000_000)


@pytest.fixture
def channel(redis_prefix: str) -> str:
    return f"{redis_prefix}:wake"


@pytest.fixture
async def driver(
    redis_url: str, redis_prefix: str, clock: FrozenClock, channel: str
) -> AsyncIterator[RedisDriver]:
    async with redis_test_driver(redis_url, redis_prefix, clock=clock, wake_channel=channel) as drv:
        yield drv


class Listener:
    """A raw subscription to the channel: every payload, in order."""

    def __init__(self, url: str, channel: str) -> None:
        self.client = Redis.from_url(url)
        self.pubsub = self.client.pubsub()
        self.channel = channel

    async def __aenter__(self) -> Listener:
        await self.pubsub.subscribe(self.channel)
        async with asyncio.timeout(WAIT_S):
            while (await self.pubsub.get_message(timeout=WAIT_S)) is None:
                pass  # the subscribe confirmation
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.pubsub.aclose()
        await self.client.aclose()

    async def heard(self) -> list[str]:
        """Every payload published so far (a PING round trip fences the ones in flight)."""
        await self.client.ping()
        await asyncio.sleep(0.05)
        out: list[str] = []
        while (message := await self.pubsub.get_message(timeout=0.05)) is not None:
            if message["type"] == "message":
                out.append(message["data"].decode())
        return out


def req(key: str, *, queue: str = "default", **kw: Any) -> EnqueueRequest:
    return EnqueueRequest(name="job", input={}, idempotency_key=key, queue=queue, **kw)


async def test_an_enqueue_announces_its_queue_once_per_slot(
    driver: RedisDriver, clock: FrozenClock, redis_url: str, channel: str
) -> None:
    now = clock.now_ms()
    async with Listener(redis_url, channel) as listener:
        await driver.enqueue(req("a"))
        await driver.enqueue(req("b"))  # the same slot: silent
        assert await listener.heard() == ["default"]
        clock.advance(DEFAULT_WAKE_SLOT_MS)
        await driver.enqueue(req("a"))  # deduped: nothing new is due
        await driver.enqueue(req("later", run_at_ms=now + 60_000))  # due after the horizon
        assert await listener.heard() == []
        await driver.enqueue(req("soon", run_at_ms=clock.now_ms() + WAKE_DUE_WITHIN_MS))
        assert await listener.heard() == ["default"]
        clock.advance(DEFAULT_WAKE_SLOT_MS)
        await driver.enqueue_many([req("x", queue="q1"), req("y", queue="q2"), req("z")])
        assert sorted(await listener.heard()) == ["default", "q1", "q2"]
        # An enqueuer whose clock is BEHIND the last announce announces too: never muted.
        behind = RedisDriver(
            driver.client,
            prefix=driver.prefix,
            clock=FrozenClock(clock.now_ms() - 5 * DEFAULT_WAKE_SLOT_MS),
            wake_channel=channel,
        )
        await behind.enqueue(req("behind"))
        assert await listener.heard() == ["default"]


async def test_without_a_channel_nothing_is_published(
    redis_url: str, redis_prefix: str, channel: str
) -> None:
    async with (
        redis_test_driver(redis_url, redis_prefix) as silent,
        Listener(redis_url, channel) as listener,
    ):
        await silent.enqueue(req("a"))
        assert await listener.heard() == []


async def test_bad_wake_options_are_refused() -> None:
    client = Redis()
    for bad in ({"wake_channel": ""}, {"wake_slot_ms": 0}, {"wake_slot_ms": True}):
        with pytest.raises(ConfigInvalidError):
            redis_driver(client, **bad)
    await client.aclose()


async def test_the_scripts_announce_starts_a_job_on_an_idle_worker(
    redis_url: str, redis_prefix: str, channel: str
) -> None:
    ran: list[int] = []

    async def body(run: Run[Any]) -> None:
        ran.append(run.input.n)

    handle = declare(body, queue="emails")
    wake = redis_wake(redis_url, channel)
    async with (
        redis_test_driver(redis_url, redis_prefix, clock=SYSTEM_CLOCK) as worker_side,
        redis_test_driver(
            redis_url, redis_prefix, clock=SYSTEM_CLOCK, wake_channel=channel
        ) as enqueuer,
    ):
        worker = job_worker(
            driver=worker_side,
            context=None,
            registry=registry_of(handle),
            queues=["emails"],
            wake=wake,
            poll_interval_ms=MINUTE_MS,  # a job started within WAIT_S was started by the wake
            idle_poll_max_ms=MINUTE_MS,
            metrics=JobMetrics(CollectorRegistry()),
            lifecycle=Lifecycle(),
            close_driver=False,
        )
        await wake.start()
        try:
            await wake.signals.wait("live", timeout_s=WAIT_S)
            await worker.start()
            await worker.signals.wait("waiting", timeout_s=WAIT_S)
            await enqueuer.enqueue(handle.request({"n": 1}))  # no announcer: the script's own
            await worker.signals.wait("settled", timeout_s=WAIT_S)
            assert ran == [1]
            assert ("emails", True) in worker.signals.emitted("wake")
        finally:
            await worker.stop()
            await wake.stop()
