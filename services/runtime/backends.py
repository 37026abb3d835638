"""Build the concrete backends from a config: the one place a pool or a client is opened.

``shared`` never builds a driver from the environment (STYLE #9/#10); the services do it here,
from ``Connections``, and close what they opened in reverse order. A service asks for what it
needs: the relay and the scheduler always need Postgres (the outbox and the watermarks live
there) even when the queue itself is on Redis.

Every pool is ``postgres_pool()``: nothing a service runs leaves session state (no session
advisory locks, LISTENs on pooled sessions, cursors or SETs), so a release sends no reset
statement. The worker-side roles (worker, relay, scheduler, deliverer, exporter) also run on
generic plans (``plan_cache_mode = force_generic_plan``): otherwise Postgres re-plans the
claim on every call, about half a millisecond of each claim's round trip. The api and the CLI
keep Postgres' own choice (``generic_plans=False``): they serve the operator's filtered pages,
where a custom plan can pick a better index.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import asyncpg

from ujobs.clock import SYSTEM_CLOCK, Clock
from ujobs.drivers.base import JobDriver
from ujobs.drivers.postgres.pool import postgres_pool
from ujobs.errors import DriverUnavailableError
from ujobs.services.config.settings import Connections

if TYPE_CHECKING:
    from redis.asyncio import Redis

    Pool = asyncpg.Pool[Any]

CONNECT_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class Backend:
    """What a service runs on: the queue's driver, and the pool / client under it."""

    driver: JobDriver
    pool: Pool | None
    redis: Redis | None
    connections: Connections

    def require_pool(self, what: str) -> Pool:
        if self.pool is None:
            raise DriverUnavailableError(
                f"{what} needs Postgres; set DATABASE_URL", meta={"variable": "DATABASE_URL"}
            )
        return self.pool

    async def ping(self) -> None:
        """One round trip to each backend in use (readiness); raises when one is down."""
        if self.pool is not None:
            await self.pool.fetchval("select 1")
        if self.redis is not None:
            await self.redis.ping()


async def open_pool(
    database_url: str, *, max_size: int, min_size: int = 1, generic_plans: bool = True
) -> Pool:
    return await postgres_pool(
        database_url,
        min_size=min(min_size, max_size),
        max_size=max_size,
        generic_plans=generic_plans,
        timeout=CONNECT_TIMEOUT_S,
    )


def open_redis(redis_url: str) -> Redis:
    from redis.asyncio import Redis

    return Redis.from_url(redis_url, socket_connect_timeout=CONNECT_TIMEOUT_S)


@contextlib.asynccontextmanager
async def open_backend(
    connections: Connections,
    *,
    need_database: bool = False,
    need_redis: bool = False,
    pool_size: int | None = None,
    generic_plans: bool = True,
    clock: Clock = SYSTEM_CLOCK,
) -> AsyncIterator[Backend]:
    """The driver ``connections.driver`` names, over a pool / client this opens and closes.
    ``generic_plans=False`` for a process serving operator pages (the module says why).

    Postgres is opened when the driver is Postgres or ``need_database`` says so; Redis when the
    driver is Redis, or ``need_redis`` (the wake) and a ``REDIS_URL`` is set.
    """
    async with contextlib.AsyncExitStack() as stack:
        pool: Pool | None = None
        redis: Redis | None = None
        if connections.database_url is not None and (
            need_database or connections.driver == "postgres"
        ):
            pool = await open_pool(
                connections.database_url,
                max_size=pool_size or connections.pg_pool_size,
                generic_plans=generic_plans,
            )
            stack.push_async_callback(pool.close)
        if connections.redis_url is not None and (need_redis or connections.driver == "redis"):
            redis = open_redis(connections.redis_url)
            stack.push_async_callback(redis.aclose)
        driver = _driver(connections, pool, redis, clock)
        stack.push_async_callback(driver.close)
        yield Backend(driver=driver, pool=pool, redis=redis, connections=connections)


def _driver(
    connections: Connections, pool: Pool | None, redis: Redis | None, clock: Clock
) -> JobDriver:
    if connections.driver == "redis":
        if redis is None:
            raise DriverUnavailableError(
                "UJOBS_DRIVER=redis needs REDIS_URL=redis://…", meta={"variable": "REDIS_URL"}
            )
        from ujobs import drivers
        from ujobs.wake.listener import REDIS_WAKE_CHANNEL

        # The enqueue script announces on the wake channel itself (one round trip, no second
        # publish from Python), so wiring installs no announcer for this driver.
        driver: JobDriver = drivers.redis_driver(
            redis,
            prefix=connections.redis_prefix,
            clock=clock,
            wake_channel=REDIS_WAKE_CHANNEL,
            settlements=connections.settlements,
        )
        return driver
    if pool is None:
        raise DriverUnavailableError(
            "the Postgres driver needs DATABASE_URL=postgresql://…",
            meta={"variable": "DATABASE_URL"},
        )
    from ujobs.drivers.postgres.driver import postgres_driver

    return postgres_driver(pool, clock=clock, settlements=connections.settlements)
