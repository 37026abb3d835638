"""Both event buses (memory, Postgres) hold one tenant rule: an event published for a tenant
reaches only that tenant's waiters, an event of no tenant reaches every waiter, and a waiter
of no tenant (a ``tenant='none'`` job) sees only events of no tenant."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest

from ujobs.events.bus import EventBus, memory_event_bus, publish_event, set_event_bus
from ujobs.events.bus_postgres import PostgresEventBus
from ujobs.execution.scope import job_scope


@pytest.fixture(params=["memory", "postgres"])
def bus_kind(request: pytest.FixtureRequest) -> str:
    kind: str = request.param
    return kind


@pytest.fixture
def _pool(bus_kind: str, request: pytest.FixtureRequest) -> asyncpg.Pool[Any] | None:
    # Resolved in a plain fixture: an async one cannot pull pg_pool through getfixturevalue.
    return request.getfixturevalue("pg_pool") if bus_kind == "postgres" else None


@pytest.fixture
def bus(_pool: asyncpg.Pool[Any] | None) -> EventBus:
    return memory_event_bus() if _pool is None else PostgresEventBus(_pool)


async def _found_by(bus: EventBus, tenant: str | None) -> list[Any]:
    """The payload of each ``e`` event a waiter of ``tenant`` may match, oldest first."""
    found: list[Any] = []
    while record := await bus.find("e", since_ms=0, match=lambda p: p not in found, tenant=tenant):
        found.append(record.payload)
    return found


async def test_a_tenants_event_reaches_only_its_tenants_waiters(bus: EventBus) -> None:
    await bus.publish("e", "from-a", tenant="org-a")
    await bus.publish("e", "from-b", tenant="org-b")
    await bus.publish("e", "from-operator")
    assert await _found_by(bus, "org-a") == ["from-a", "from-operator"]
    assert await _found_by(bus, "org-b") == ["from-b", "from-operator"]
    assert await _found_by(bus, None) == ["from-operator"]
    only_b = await bus.find("e", since_ms=0, tenant="org-b")
    assert only_b is not None
    assert (only_b.payload, only_b.tenant) == ("from-b", "org-b")


async def test_publish_event_publishes_as_the_acting_tenant_unless_told(bus: EventBus) -> None:
    set_event_bus(bus)
    try:
        with job_scope("org-a", None):
            scoped = await publish_event("e", "a's job")
            everyone = await publish_event("e", "said so", tenant=None)
        outside = await publish_event("e", "a script")
    finally:
        set_event_bus(None)
    assert (scoped.tenant, everyone.tenant, outside.tenant) == ("org-a", None, None)
    assert await bus.find("e", since_ms=0, match=lambda p: p == "a's job") is None
    mine = await bus.find("e", since_ms=0, match=lambda p: p == "a's job", tenant="org-a")
    assert mine is not None
