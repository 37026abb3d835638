"""The memory event bus: one clock, matchable until expiry, and the process seam."""

from __future__ import annotations

import pytest

from ujobs.clock import FrozenClock
from ujobs.errors import InputInvalidError, InvariantError
from ujobs.events.bus import (
    EVENTS_PURGE_TARGET,
    EventBus,
    event_bus,
    events_purge_target,
    memory_event_bus,
    publish_event,
    reset_event_bus,
    set_event_bus,
)

T0 = 1_700_000_000_000


async def test_publish_stamps_with_the_bus_clock_and_find_reads_since() -> None:
    clock = FrozenClock(T0)
    bus = memory_event_bus(clock=clock)
    first = await bus.publish("invoice.paid", {"id": 1})
    clock.advance(1_000)
    second = await bus.publish("invoice.paid", {"id": 2})
    assert first.published_at_ms == T0
    assert second.published_at_ms == T0 + 1_000
    assert await bus.now() == T0 + 1_000
    found = await bus.find("invoice.paid", since_ms=T0)
    assert found is not None
    assert found.payload == {"id": 1}
    later = await bus.find("invoice.paid", since_ms=T0 + 1)
    assert later is not None
    assert later.payload == {"id": 2}
    assert await bus.find("invoice.paid", since_ms=T0 + 1_001) is None
    assert await bus.find("invoice.void", since_ms=0) is None


async def test_match_as_a_subset_or_a_function() -> None:
    bus = memory_event_bus(clock=FrozenClock(T0))
    await bus.publish("order", {"id": "a", "meta": {"region": "eu", "tier": 1}})
    await bus.publish("order", {"id": "b", "meta": {"region": "us"}})
    by_subset = await bus.find("order", since_ms=0, match={"meta": {"region": "us"}})
    assert by_subset is not None
    assert by_subset.payload["id"] == "b"
    by_fn = await bus.find("order", since_ms=0, match=lambda p: p["id"] == "a")
    assert by_fn is not None
    assert by_fn.payload["id"] == "a"
    assert await bus.find("order", since_ms=0, match={"id": "c"}) is None


async def test_payload_is_stored_as_an_independent_json_copy() -> None:
    bus = memory_event_bus(clock=FrozenClock(T0))
    payload = {"items": [1, 2]}
    await bus.publish("e", payload)
    payload["items"].append(3)
    found = await bus.find("e", since_ms=0)
    assert found is not None
    assert found.payload == {"items": [1, 2]}
    found.payload["items"].append(99)
    again = await bus.find("e", since_ms=0)
    assert again is not None
    assert again.payload == {"items": [1, 2]}


async def test_a_payload_json_cannot_carry_is_refused() -> None:
    bus = memory_event_bus(clock=FrozenClock(T0))
    with pytest.raises(InputInvalidError) as info:
        await bus.publish("e", {"when": {1, 2}})
    assert info.value.code == "X_INPUT_INVALID"
    with pytest.raises(InvariantError):
        await bus.publish("", {})


async def test_expired_events_do_not_match_and_purge_answers_rows_removed() -> None:
    clock = FrozenClock(T0)
    bus = memory_event_bus(clock=clock)
    await bus.publish("e", {"n": 1}, ttl_ms=1_000)
    await bus.publish("e", {"n": 2}, ttl_ms=10_000)
    clock.advance(1_000)
    found = await bus.find("e", since_ms=0)
    assert found is not None
    assert found.payload == {"n": 2}
    target = events_purge_target(bus)
    assert target.name == EVENTS_PURGE_TARGET == "x_job_events"
    assert await target.purge_expired(clock.now_ms()) == 1
    assert await bus.purge_expired() == 0
    clock.advance(9_000)
    assert await target.purge_expired(0) == 1


async def test_process_bus_default_install_and_reset() -> None:
    default = event_bus()
    assert isinstance(default, EventBus)
    assert event_bus() is default
    await publish_event("ping", {"n": 1})
    assert await default.find("ping", since_ms=0) is not None
    reset_event_bus()
    fresh = event_bus()
    assert fresh is not default
    assert await fresh.find("ping", since_ms=0) is None

    installed = memory_event_bus(clock=FrozenClock(T0))
    set_event_bus(installed)
    record = await publish_event("pong", {"n": 2})
    assert record.published_at_ms == T0
    assert await installed.find("pong", since_ms=0) is not None
    set_event_bus(None)
    assert event_bus() is fresh
    with pytest.raises(InvariantError):
        set_event_bus(object())  # type: ignore[arg-type]
