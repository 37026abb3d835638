"""The Redis wake against a real Redis: proof by probe, re-dial, and what an enqueue announces.

Each test listens on a channel of its own (``redis_prefix``), so parallel test runs never hear
each other. Time is real only where a socket is involved; the announce throttle runs on a
``FrozenClock``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from tests.support.wake import WAIT_S, Heard, is_live, wake_logs
from ujobs.clock import FrozenClock
from ujobs.drivers.base import ClaimOptions, EnqueueRequest
from ujobs.drivers.memory.driver import memory_driver
from ujobs.wake.announce import AnnouncingDriver, RedisAnnouncer, announcing, redis_announcer
from ujobs.wake.listener import PROBE_PREFIX, ChannelWake, redis_wake
from ujobs.wake.local import on_enqueued
from ujobs.wake.protocol import (
    IDLE_POLL_CEILING_MS,
    REDIS_WAKE_SLOT_MS,
    WOKEN_IDLE_POLL_CEILING_MS,
    idle_ceiling_ms,
)
from ujobs.wake.transport_redis import session_client_name

UNREACHABLE = "redis://127.0.0.1:1/0"


@pytest.fixture
def channel(redis_prefix: str) -> str:
    return f"{redis_prefix}:wake"


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(redis_url)
    yield client
    await client.aclose()


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger="ujobs.wake")
    return caplog


async def live_wake(url_or_client: aioredis.Redis | str, channel: str) -> ChannelWake:
    wake = redis_wake(url_or_client, channel)
    await wake.start()
    await wake.signals.wait("live", timeout_s=WAIT_S)
    return wake


def request(key: str, *, queue: str = "default", run_at_ms: int | None = None) -> EnqueueRequest:
    return EnqueueRequest(
        name="wake-test", input={}, idempotency_key=key, queue=queue, run_at_ms=run_at_ms
    )


async def settle(announcer: RedisAnnouncer, heard: Heard, marker: str) -> None:
    """Every announce made so far has been delivered: they were published before ``marker``,
    and one channel delivers in publish order."""
    await announcer.flush()
    announcer.announce(marker, throttled=False)
    await announcer.flush()
    await heard.until(marker)


async def test_a_probe_proves_the_channel_live(
    redis_url: str, channel: str, logs: pytest.LogCaptureFixture
) -> None:
    wake = redis_wake(redis_url, channel)
    assert is_live(wake) is False
    await wake.start()
    try:
        await wake.signals.wait("live", timeout_s=WAIT_S)
        assert is_live(wake) is True
        assert idle_ceiling_ms(wake) == WOKEN_IDLE_POLL_CEILING_MS
        [record] = wake_logs(logs, "jobs.wake.live")
        assert record.transport == "redis"  # type: ignore[attr-defined]
        assert wake_logs(logs, "jobs.wake.unverified") == []
    finally:
        await wake.stop()
    assert is_live(wake) is False
    assert idle_ceiling_ms(wake) == IDLE_POLL_CEILING_MS


async def test_a_wake_built_on_a_callers_client_is_proven_too(
    redis: aioredis.Redis, channel: str
) -> None:
    wake = await live_wake(redis, channel)
    heard = Heard()
    wake.subscribe(heard)
    try:
        await redis.publish(channel, "emails")
        await heard.until("emails")
    finally:
        await wake.stop()
    assert await redis.ping()  # the caller's client is left open


async def test_an_enqueue_wakes_subscribers_here_and_in_other_processes(
    redis_url: str, channel: str
) -> None:
    wake = await live_wake(redis_url, channel)
    heard, local = Heard(), Heard()
    wake.subscribe(heard)
    unsubscribe_local = on_enqueued(local)
    announcer = redis_announcer(redis_url, channel)
    driver = announcing(memory_driver(), announcer)
    try:
        answer = await driver.enqueue(request("k1", queue="emails"))
        assert answer.deduped is False
        await heard.until("emails")
        assert local.payloads == ["emails"]
    finally:
        unsubscribe_local()
        await announcer.close()
        await wake.stop()


async def test_announces_are_throttled_per_queue_per_slot(redis_url: str, channel: str) -> None:
    clock = FrozenClock(1_700_000_000_000)  # the start of a slot
    wake = await live_wake(redis_url, channel)
    heard, local = Heard(), Heard()
    wake.subscribe(heard)
    unsubscribe_local = on_enqueued(local)
    announcer = redis_announcer(redis_url, channel, clock=clock)
    driver = announcing(memory_driver(clock=clock), announcer)
    try:
        for n in range(3):
            await driver.enqueue(request(f"a{n}", queue="a"))
            clock.advance(REDIS_WAKE_SLOT_MS // 4)  # still inside the slot
        await driver.enqueue(request("b0", queue="b"))
        await settle(announcer, heard, "marker-1")
        assert heard.count("a") == 1
        assert heard.count("b") == 1
        assert len(announcer.signals.emitted("throttled")) == 2

        clock.advance(REDIS_WAKE_SLOT_MS)  # the next slot announces again
        await driver.enqueue(request("a3", queue="a"))
        await settle(announcer, heard, "marker-2")
        assert heard.count("a") == 2
        # This process's own loops hear every due enqueue, unthrottled.
        assert local.count("a") == 4
    finally:
        unsubscribe_local()
        await announcer.close()
        await wake.stop()


async def test_a_deduped_enqueue_announces_nothing(redis_url: str, channel: str) -> None:
    clock = FrozenClock()
    wake = await live_wake(redis_url, channel)
    heard, local = Heard(), Heard()
    wake.subscribe(heard)
    unsubscribe_local = on_enqueued(local)
    announcer = redis_announcer(redis_url, channel, clock=clock)
    driver = announcing(memory_driver(clock=clock), announcer)
    try:
        first = await driver.enqueue(request("same", queue="q"))
        clock.advance(REDIS_WAKE_SLOT_MS * 4)  # the throttle would let a new row through
        again = await driver.enqueue(request("same", queue="q"))
        assert again.deduped is True
        assert again.id == first.id
        batch = await driver.enqueue_many([request("same", queue="q")])
        assert batch[0].deduped is True
        await settle(announcer, heard, "marker")
        assert heard.count("q") == 1
        assert local.count("q") == 1
    finally:
        unsubscribe_local()
        await announcer.close()
        await wake.stop()


async def test_only_rows_due_within_a_second_are_announced(redis_url: str, channel: str) -> None:
    clock = FrozenClock()
    wake = await live_wake(redis_url, channel)
    heard = Heard()
    wake.subscribe(heard)
    announcer = redis_announcer(redis_url, channel, clock=clock)
    driver = announcing(memory_driver(clock=clock), announcer)
    try:
        now = clock.now_ms()
        await driver.enqueue(request("later", queue="later", run_at_ms=now + 1_001))
        await driver.enqueue(request("soon", queue="soon", run_at_ms=now + 1_000))
        await driver.enqueue(request("past", queue="past", run_at_ms=now - 60_000))
        await settle(announcer, heard, "marker")
        # Publishes run concurrently, so their order is not the enqueues' order.
        assert sorted(heard.payloads) == ["marker", "past", "soon"]
    finally:
        await announcer.close()
        await wake.stop()


async def test_enqueue_many_announces_each_queue_that_gained_a_due_row_once(
    redis_url: str, channel: str
) -> None:
    clock = FrozenClock()
    wake = await live_wake(redis_url, channel)
    heard = Heard()
    wake.subscribe(heard)
    announcer = redis_announcer(redis_url, channel, clock=clock)
    driver = announcing(memory_driver(clock=clock), announcer)
    try:
        clock.advance(REDIS_WAKE_SLOT_MS)
        await driver.enqueue_many(
            [
                request("m1", queue="x"),
                request("m2", queue="x"),
                request("m3", queue="y"),
                request("m4", queue="z", run_at_ms=clock.now_ms() + 60_000),
            ]
        )
        await settle(announcer, heard, "marker")
        assert sorted(heard.payloads) == ["marker", "x", "y"]
    finally:
        await announcer.close()
        await wake.stop()


async def test_operator_calls_that_make_rows_due_announce_unthrottled(
    redis_url: str, channel: str
) -> None:
    clock = FrozenClock()
    wake = await live_wake(redis_url, channel)
    heard = Heard()
    wake.subscribe(heard)
    announcer = redis_announcer(redis_url, channel, clock=clock)
    driver: AnnouncingDriver = announcing(memory_driver(clock=clock), announcer)
    ops = driver.introspect
    assert ops is not None
    try:
        done = await driver.enqueue(request("r", queue="ops"))
        [job] = await driver.claim(ClaimOptions(queues=["ops"], limit=1, worker_id="w"))
        assert await driver.ack(job.id, job.ref)
        delayed = await driver.enqueue(request("d", queue="ops", run_at_ms=clock.now_ms() + 60_000))
        # All in the slot the first enqueue announced in: none of these is throttled.
        await ops.requeue(done.id)
        await ops.promote(delayed.id)
        await ops.pause_queue("ops")
        await ops.resume_queue("ops")
        await settle(announcer, heard, "marker")
        assert heard.count("ops") == 4
    finally:
        await announcer.close()
        await wake.stop()


async def test_unreachable_redis_stays_unverified_and_says_so_once(
    channel: str, logs: pytest.LogCaptureFixture
) -> None:
    wake = redis_wake(UNREACHABLE, channel, backoff_min_s=0.01, backoff_max_s=0.02)
    await wake.start()
    try:
        for _ in range(4):  # it keeps re-dialling, and keeps quiet about it
            mark = wake.signals.mark()
            await wake.signals.wait("dial-failed", since=mark, timeout_s=WAIT_S)
        assert wake.live is False
        assert idle_ceiling_ms(wake) == IDLE_POLL_CEILING_MS
        [record] = wake_logs(logs, "jobs.wake.unverified")
        assert "REDIS_URL" in record.fix  # type: ignore[attr-defined]
        assert wake_logs(logs, "jobs.wake.live") == []
    finally:
        await wake.stop()


async def test_a_killed_connection_is_redialled_and_proven_again(
    redis_url: str, redis: aioredis.Redis, channel: str, logs: pytest.LogCaptureFixture
) -> None:
    wake = await live_wake(redis_url, channel)
    heard = Heard()
    wake.subscribe(heard)
    try:
        name = session_client_name(channel)
        [session] = [c for c in await redis.client_list() if c["name"] == name]
        mark = wake.signals.mark()
        await redis.client_kill_filter(_id=session["id"])
        await wake.signals.wait("lost", since=mark, timeout_s=WAIT_S)
        await wake.signals.wait("live", since=mark, timeout_s=WAIT_S)
        assert wake.live is True
        assert len(wake_logs(logs, "jobs.wake.live")) == 2
        assert len(wake_logs(logs, "jobs.wake.lost")) == 1
        # The new session is a new connection, and it carries announces.
        [again] = [c for c in await redis.client_list() if c["name"] == name]
        assert again["id"] != session["id"]
        await redis.publish(channel, "after-redial")
        await heard.until("after-redial")
    finally:
        await wake.stop()


async def test_a_live_flag_drops_while_the_session_is_down(
    redis_url: str, redis: aioredis.Redis, channel: str
) -> None:
    # A long backoff holds the wake in its "lost" state long enough to look at it.
    wake = redis_wake(redis_url, channel, backoff_min_s=30, backoff_max_s=30)
    await wake.start()
    try:
        await wake.signals.wait("live", timeout_s=WAIT_S)
        name = session_client_name(channel)
        [session] = [c for c in await redis.client_list() if c["name"] == name]
        mark = wake.signals.mark()
        await redis.client_kill_filter(_id=session["id"])
        await wake.signals.wait("lost", since=mark, timeout_s=WAIT_S)
        assert wake.live is False
    finally:
        await wake.stop()


async def test_probes_never_reach_subscribers(
    redis_url: str, redis: aioredis.Redis, channel: str
) -> None:
    first = await live_wake(redis_url, channel)
    heard_first = Heard()
    first.subscribe(heard_first)
    # The second wake's probes go over the channel the first one listens on.
    mark = first.signals.mark()
    second = await live_wake(redis_url, channel)
    heard_second = Heard()
    second.subscribe(heard_second)
    try:
        await first.signals.wait("probe", since=mark, timeout_s=WAIT_S)  # the second's probe
        await redis.publish(channel, f"{PROBE_PREFIX}not-a-queue")
        await redis.publish(channel, "real")
        await heard_first.until("real")
        await heard_second.until("real")
        assert heard_first.payloads == ["real"]
        assert heard_second.payloads == ["real"]
    finally:
        await first.stop()
        await second.stop()


async def test_a_failing_callback_is_logged_and_the_others_still_hear(
    redis_url: str, redis: aioredis.Redis, channel: str, logs: pytest.LogCaptureFixture
) -> None:
    wake = await live_wake(redis_url, channel)

    def broken(_queue: str) -> None:
        raise RuntimeError("listener bug")

    heard, dropped = Heard(), Heard()
    wake.subscribe(broken)
    wake.subscribe(heard)
    unsubscribe = wake.subscribe(dropped)
    unsubscribe()
    unsubscribe()
    try:
        await redis.publish(channel, "q")
        await heard.until("q")
        assert dropped.payloads == []
        [record] = wake_logs(logs, "jobs.wake.callback-failed")
        assert record.queue == "q"  # type: ignore[attr-defined]
    finally:
        await wake.stop()


async def test_start_and_stop_are_safe_twice(redis_url: str, channel: str) -> None:
    wake = redis_wake(redis_url, channel)
    await wake.stop()  # before start: nothing to do
    wake = redis_wake(redis_url, channel)
    async with wake:
        await wake.start()
        await wake.signals.wait("live", timeout_s=WAIT_S)
    await wake.stop()
    assert wake.live is False
