"""An endpoint's rate is fleet-wide: two deliverers' paces reserving against one Postgres take
slots one gap apart between them (``PgPace``), where two in-process paces would each send at
the full rate (``LocalPace``: twice the rate for two deliverers)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from ujobs.clock import FrozenClock
from ujobs.webhooks.pace import LocalPace
from ujobs.webhooks.pace_pg import PgPace
from ujobs.webhooks.secrets import SecretBox
from ujobs.webhooks.store_pg import PgWebhookStore, new_secret_key

T0 = 1_700_000_000_000


@pytest.fixture
async def second_pool(pg_dsn: str) -> AsyncIterator[asyncpg.Pool[Any]]:
    """Another deliverer's own connections to the same database."""
    pool = await asyncpg.create_pool(pg_dsn, min_size=1, max_size=4)
    assert pool is not None
    try:
        yield pool
    finally:
        await pool.close()


async def endpoint(pool: asyncpg.Pool[Any], ident: str = "ep_1") -> str:
    store = PgWebhookStore(pool, SecretBox.parse(new_secret_key()))
    await store.add_endpoint("https://partner.example/hook", endpoint_id=ident, rate_per_s=10)
    return ident


async def test_two_deliverers_share_one_endpoints_rate(
    pg_pool: asyncpg.Pool[Any], second_pool: asyncpg.Pool[Any]
) -> None:
    ep = await endpoint(pg_pool)
    clock = FrozenClock(T0)
    first, second = PgPace(pg_pool, clock), PgPace(second_pool, clock)
    waits = [await pace.reserve(ep, 10) for pace in (first, second, first, second)]
    assert waits == pytest.approx([0.0, 0.1, 0.2, 0.3])
    # In-process paces know nothing of each other: the endpoint would get twice its rate.
    apart = [LocalPace(), LocalPace()]
    local = [await apart[n % 2].reserve(ep, 10) for n in range(4)]
    assert local == pytest.approx([0.0, 0.0, 0.1, 0.1], abs=0.01)


async def test_concurrent_reservations_take_distinct_slots(
    pg_pool: asyncpg.Pool[Any], second_pool: asyncpg.Pool[Any]
) -> None:
    ep = await endpoint(pg_pool)
    clock = FrozenClock(T0)
    paces = [PgPace(pg_pool, clock), PgPace(second_pool, clock)]
    waits = await asyncio.gather(*(paces[n % 2].reserve(ep, 20) for n in range(10)))
    assert sorted(waits) == pytest.approx([n * 0.05 for n in range(10)])


async def test_a_slot_is_never_in_the_past_and_endpoints_are_paced_apart(
    pg_pool: asyncpg.Pool[Any],
) -> None:
    ep, other = await endpoint(pg_pool), await endpoint(pg_pool, "ep_2")
    clock = FrozenClock(T0)
    pace = PgPace(pg_pool, clock)
    assert await pace.reserve(ep, 4) == 0
    assert await pace.reserve(ep, 4) == pytest.approx(0.25)
    assert await pace.reserve(other, 4) == 0  # another endpoint's row
    clock.advance(10_000)  # idle: the next slot is now, not a backlog of missed slots
    assert await pace.reserve(ep, 4) == 0
    assert await pace.reserve(ep, 4) == pytest.approx(0.25)
    # A changed rate starts where the last reservation ended, and spaces the next by its gap.
    assert await pace.reserve(ep, 1) == pytest.approx(0.5)
    assert await pace.reserve(ep, 1) == pytest.approx(1.5)
