"""The driver conformance harness: ONE suite, run against every registered driver.

Adding a driver (a few lines, here)
-----------------------------------
Register a factory with ``@driver_factory(name, needs=(fixture names...))``. A factory is an
async generator that takes the test's ``FrozenClock`` and a dict of the fixtures it named, and
yields a ready, EMPTY driver that reads that clock for every time decision; code after the
``yield`` is the teardown::

    @driver_factory("postgres", needs=("pg_pool",))
    async def _postgres(clock: FrozenClock, deps: Deps) -> AsyncIterator[JobDriver]:
        from ujobs.drivers.postgres.driver import postgres_driver

        driver = postgres_driver(deps["pg_pool"], clock=clock)
        yield driver
        await driver.close()

    @driver_factory("redis", needs=("redis_url", "redis_prefix"))
    async def _redis(clock: FrozenClock, deps: Deps) -> AsyncIterator[JobDriver]:
        ...

Import the backend inside the factory, so a checkout without it still runs the others. Every
test in this directory then runs once per driver (ids ``test_x[memory]``, ``test_x[postgres]``);
``-k memory`` runs one driver's share. ``needs`` fixtures (``pg_pool``, ``redis_url``,
``redis_prefix`` from ``tests/support/services.py``) are resolved per test, so each test gets
its own database or key prefix.

Optional capabilities
---------------------
A test that needs one takes the ``introspect`` / ``leases`` / ``workers`` / ``backfills``
fixture, which SKIPS when the driver answers None for it — by capability, never by name.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any

import pytest

from ujobs.clock import FrozenClock
from ujobs.drivers.base import (
    BackfillLedger,
    JobDriver,
    JobIntrospection,
    LeaseStore,
    WorkerRegistry,
)

Deps = Mapping[str, Any]
FactoryFn = Callable[[FrozenClock, Deps], AsyncIterator[JobDriver]]

# Minute-aligned (so counter buckets are easy to reason about) and well after the epoch.
START_MS = 1_700_000_040_000


@dataclass(frozen=True, slots=True)
class DriverFactory:
    open: Callable[[FrozenClock, Deps], AbstractAsyncContextManager[JobDriver]]
    needs: tuple[str, ...]


DRIVER_FACTORIES: dict[str, DriverFactory] = {}


def driver_factory(name: str, *, needs: tuple[str, ...] = ()) -> Callable[[FactoryFn], FactoryFn]:
    """Register ``fn`` as the factory of driver ``name`` (see the module docstring)."""

    def register(fn: FactoryFn) -> FactoryFn:
        DRIVER_FACTORIES[name] = DriverFactory(asynccontextmanager(fn), needs)
        return fn

    return register


# --- the registered drivers ---------------------------------------------------------------


@driver_factory("memory+announcing")
async def _memory_announcing(clock: FrozenClock, deps: Deps) -> AsyncIterator[JobDriver]:
    # The wake's driver wrapper (ujobs.wake.announce) delegates every operation: held to the
    # same suite, so a member it forgets or bends fails here.
    from ujobs.drivers.memory.driver import memory_driver
    from ujobs.wake.announce import announcing

    driver = announcing(memory_driver(clock=clock))
    yield driver
    await driver.close()


@driver_factory("memory")
async def _memory(clock: FrozenClock, deps: Deps) -> AsyncIterator[JobDriver]:
    from ujobs.drivers.memory.driver import memory_driver

    driver = memory_driver(clock=clock)
    yield driver
    await driver.close()


@driver_factory("postgres", needs=("pg_pool",))
async def _postgres(clock: FrozenClock, deps: Deps) -> AsyncIterator[JobDriver]:
    from ujobs.drivers.postgres.driver import postgres_driver

    driver = postgres_driver(deps["pg_pool"], clock=clock)
    yield driver
    await driver.close()


@driver_factory("redis", needs=("redis_url", "redis_prefix"))
async def _redis(clock: FrozenClock, deps: Deps) -> AsyncIterator[JobDriver]:
    from tests.support.redis_keys import redis_test_driver

    # Its own client and key prefix; the prefix's keys are deleted after the test (never FLUSHDB).
    async with redis_test_driver(deps["redis_url"], deps["redis_prefix"], clock=clock) as driver:
        yield driver


# --- fixtures -----------------------------------------------------------------------------


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock(START_MS)


@pytest.fixture(params=sorted(DRIVER_FACTORIES))
def driver_name(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture
def _driver_deps(driver_name: str, request: pytest.FixtureRequest) -> dict[str, Any]:
    # Resolved here, in a plain fixture, because an async fixture cannot pull another async
    # fixture (pg_pool) through getfixturevalue while its own loop is running.
    return {need: request.getfixturevalue(need) for need in DRIVER_FACTORIES[driver_name].needs}


@pytest.fixture
async def driver(
    driver_name: str, clock: FrozenClock, _driver_deps: dict[str, Any]
) -> AsyncIterator[JobDriver]:
    async with DRIVER_FACTORIES[driver_name].open(clock, _driver_deps) as opened:
        yield opened


@pytest.fixture
def introspect(driver: JobDriver) -> JobIntrospection:
    surface = driver.introspect
    if surface is None:
        pytest.skip(f"driver {driver.name!r} has no introspect")
    return surface


@pytest.fixture
def leases(driver: JobDriver) -> LeaseStore:
    store = driver.leases
    if store is None:
        pytest.skip(f"driver {driver.name!r} has no lease store")
    return store


@pytest.fixture
def workers(driver: JobDriver) -> WorkerRegistry:
    registry = driver.workers
    if registry is None:
        pytest.skip(f"driver {driver.name!r} has no worker registry")
    return registry


@pytest.fixture
def backfills(driver: JobDriver) -> BackfillLedger:
    ledger = driver.backfills
    if ledger is None:
        pytest.skip(f"driver {driver.name!r} has no backfill ledger")
    return ledger
