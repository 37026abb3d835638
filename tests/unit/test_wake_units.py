"""The wake's pure parts: the idle ceilings, the slot throttle, the in-process wake, and the
refusals of a wake or wrapper built wrong. The transports are tested against real servers in
tests/integration/test_wake_*.py."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

import ujobs.drivers.postgres.driver as pg_driver
from ujobs.clock import FrozenClock
from ujobs.drivers.base import EnqueueRequest, JobDriver, JobIntrospection
from ujobs.drivers.memory.driver import memory_driver
from ujobs.errors import ConfigInvalidError
from ujobs.wake.announce import RedisAnnouncer, SlotThrottle, announcing, redis_announcer
from ujobs.wake.listener import PROBE_PREFIX, ChannelWake, redis_wake
from ujobs.wake.local import listener_count, on_enqueued, signal_enqueued
from ujobs.wake.protocol import (
    IDLE_POLL_CEILING_MS,
    REDIS_WAKE_SLOT_MS,
    WAKE_DUE_WITHIN_MS,
    WAKE_SLOT_MS,
    WOKEN_IDLE_POLL_CEILING_MS,
    QueueWake,
    idle_ceiling_ms,
)


def test_the_ceiling_is_2s_without_a_proven_wake() -> None:
    # The 5 s of a live wake is asserted where a wake is proven: tests/integration/test_wake_*.
    assert idle_ceiling_ms(None) == IDLE_POLL_CEILING_MS == 2_000
    unproven = redis_wake("redis://127.0.0.1:6379/0")
    assert idle_ceiling_ms(unproven) == 2_000
    assert WOKEN_IDLE_POLL_CEILING_MS == 5_000


def test_a_declared_ceiling_wins_either_way() -> None:
    assert idle_ceiling_ms(redis_wake("redis://127.0.0.1:6379/0"), 9_000) == 9_000
    assert idle_ceiling_ms(None, 1) == 1


@pytest.mark.parametrize("bad", [0, -5, True, 1.5, "2s"])
def test_a_declared_ceiling_must_be_whole_positive_ms(bad: object) -> None:
    with pytest.raises(ConfigInvalidError) as caught:
        idle_ceiling_ms(None, bad)  # type: ignore[arg-type]
    assert caught.value.code == "X_CONFIG_INVALID"


def test_the_throttle_numbers_match_the_postgres_statements() -> None:
    assert pg_driver.WAKE_SLOT_MS == WAKE_SLOT_MS == 250
    assert pg_driver.WAKE_DUE_WITHIN_MS == WAKE_DUE_WITHIN_MS == 1_000


async def test_the_redis_announce_slot_is_narrower_than_the_notify_slot() -> None:
    # A PUBLISH holds no commit lock, so only the NOTIFY keeps the 250 ms slot.
    assert REDIS_WAKE_SLOT_MS == 10 < WAKE_SLOT_MS
    for announcer in (
        RedisAnnouncer("redis://127.0.0.1:6379/0"),
        redis_announcer("redis://127.0.0.1:6379/0"),
    ):
        assert announcer.throttle.slot_ms == REDIS_WAKE_SLOT_MS
        await announcer.close()


def test_the_slot_throttle_admits_once_per_key_per_epoch_aligned_slot() -> None:
    clock = FrozenClock(1_700_000_000_000 + WAKE_SLOT_MS - 1)  # the last ms of a slot
    throttle = SlotThrottle(clock)
    assert throttle.admit("a") is True
    assert throttle.admit("a") is False
    assert throttle.admit("b") is True
    clock.advance(1)  # the next slot begins
    assert throttle.admit("a") is True
    clock.advance(WAKE_SLOT_MS - 1)
    assert throttle.admit("a") is False


def test_the_in_process_wake_calls_every_listener_until_unsubscribed() -> None:
    heard: list[str] = []
    before = listener_count()

    def broken(_queue: str) -> None:
        raise RuntimeError("a listener bug never fails the enqueue")

    off_broken = on_enqueued(broken)
    off = on_enqueued(heard.append)
    signal_enqueued("emails")
    off()
    off()
    off_broken()
    signal_enqueued("emails")
    assert heard == ["emails"]
    assert listener_count() == before


def test_a_wake_is_a_queue_wake_and_refuses_unknown_channels() -> None:
    wake = redis_wake("redis://127.0.0.1:6379/0", "ujobs:wake")
    assert isinstance(wake, QueueWake)
    assert wake.live is False
    with pytest.raises(ConfigInvalidError):
        wake.channel("x_outbox_wake")
    with pytest.raises(ConfigInvalidError):
        wake.subscribe_channel("elsewhere", lambda _q: None)


@pytest.mark.parametrize(
    "options",
    [
        {"probe_timeout_s": 0},
        {"reprobe_every_s": -1},
        {"backoff_min_s": True},
        {"backoff_max_s": "5"},
    ],
)
def test_a_wake_refuses_bad_timings(options: dict[str, Any]) -> None:
    with pytest.raises(ConfigInvalidError):
        redis_wake("redis://127.0.0.1:6379/0", **options)


def test_a_wake_needs_a_channel() -> None:
    with pytest.raises(ConfigInvalidError):
        ChannelWake(lambda: None, (), transport="x", fix="-")  # type: ignore[arg-type, return-value]


def test_the_probe_prefix_can_never_be_a_queue_name() -> None:
    from ujobs.jobs.job import NAME_PATTERN

    assert NAME_PATTERN.match(f"{PROBE_PREFIX}abc") is None


def _request(key: str, *, run_at_ms: int | None = None) -> EnqueueRequest:
    return EnqueueRequest(name="n", input={}, idempotency_key=key, queue="q", run_at_ms=run_at_ms)


async def test_the_wrapper_is_a_driver_once_and_announces_only_due_new_rows() -> None:
    clock = FrozenClock()
    driver = announcing(memory_driver(clock=clock))
    assert isinstance(driver, JobDriver)
    assert isinstance(driver.introspect, JobIntrospection)
    assert driver.name == "memory"
    with pytest.raises(ConfigInvalidError):
        announcing(driver)
    heard: list[str] = []
    off = on_enqueued(heard.append)
    try:
        await driver.enqueue(_request("1"))
        await driver.enqueue(_request("1"))  # deduped
        await driver.enqueue(_request("2", run_at_ms=clock.now_ms() + 5_000))  # not due soon
        debounced = dataclasses.replace(_request("d"), queue="later", debounce_ms=5_000)
        await driver.enqueue(debounced)  # due a debounce from now
        short = dataclasses.replace(_request("e"), queue="soon", debounce_ms=500)
        await driver.enqueue(short)  # within the wake's horizon
        assert heard == ["q", "soon"]
        # A generator: the inner driver reads it once; its due new rows announce as a list's.
        batch = (
            EnqueueRequest(name="n", input={}, idempotency_key=key, queue=queue)
            for key, queue in (("3", "r"), ("1", "q"), ("4", "s"), ("5", "r"))
        )
        answers = await driver.enqueue_many(batch)
        assert [a.deduped for a in answers] == [False, True, False, False]
        assert heard == ["q", "soon", "r", "s"]
    finally:
        off()
