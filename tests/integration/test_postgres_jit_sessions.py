"""The driver's sessions run without JIT on any pool (``plan_settings``): a ``postgres_pool()``
starts them that way; on a pool whose sessions start with JIT on, the driver turns it off on
the connections it holds and back on before they go back, so the user's own sessions keep
the setting they had."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import asyncpg
import pytest
from asyncpg.exceptions._base import InternalClientError

from ujobs.drivers.base import ClaimOptions, EnqueueRequest
from ujobs.drivers.postgres.driver import postgres_driver
from ujobs.drivers.postgres.held_connections import HeldConnections
from ujobs.drivers.postgres.plan_settings import JIT_ON
from ujobs.drivers.postgres.pool import postgres_pool
from ujobs.outbox import postgres_outbox_store

JIT = "select current_setting('jit')"


async def test_a_postgres_pool_starts_every_session_without_jit(pg_dsn: str) -> None:
    for generic_plans in (True, False):
        pool = await postgres_pool(pg_dsn, min_size=1, max_size=1, generic_plans=generic_plans)
        try:
            assert await pool.fetchval(JIT) == "off"
        finally:
            await pool.close()


async def test_an_explicit_jit_setting_given_to_postgres_pool_wins(pg_dsn: str) -> None:
    pool = await postgres_pool(pg_dsn, min_size=1, max_size=1, server_settings={"jit": "on"})
    try:
        assert await pool.fetchval(JIT) == "on"
    finally:
        await pool.close()


async def test_on_a_users_pool_with_jit_on_the_held_connection_runs_without_it(
    pg_dsn: str,
) -> None:
    pool = await postgres_pool(pg_dsn, min_size=1, max_size=1, server_settings={"jit": "on"})
    held = HeldConnections(pool)
    try:
        assert await held.run(lambda conn: conn.fetchval(JIT)) == "off"
        driver = postgres_driver(pool)
        await driver.enqueue(EnqueueRequest(name="n", input={}, idempotency_key="k"))
        [job] = await driver.claim(ClaimOptions(queues=["default"], limit=1, worker_id="w"))
        assert await driver.ack(job.id, job.ref)
        await driver.close()
        await held.close()
        # One connection in the pool: the one the driver held, handed back as it came.
        assert await pool.fetchval(JIT) == "on"
    finally:
        await pool.close()


async def test_past_the_held_connections_a_pooled_statement_runs_without_jit_too(
    pg_dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Taken for one statement, the connection is left to the pool's own reset (asyncpg's
    default ``RESET ALL``), which gives the user's next statement its setting back."""
    pool = await asyncpg.create_pool(pg_dsn, min_size=1, max_size=1, server_settings={"jit": "on"})
    held = HeldConnections(pool, max_held=0)  # every statement goes through the pool
    try:
        with caplog.at_level(logging.WARNING, logger="ujobs.postgres"):
            for _ in range(3):
                assert await held.run(lambda conn: conn.fetchval(JIT)) == "off"
                assert await pool.fetchval(JIT) == "on"
        [warned] = [r for r in caplog.records if r.getMessage() == JIT_ON]
        assert warned.component == "the Postgres driver"  # type: ignore[attr-defined]
    finally:
        await held.close()
        await pool.close()


async def test_a_relay_on_a_pool_with_jit_on_says_so_once(
    pg_dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The stores that run their statements on the executor they were given cannot turn JIT
    off without a round trip per statement: the first one names the setting, once."""
    jit_on = await postgres_pool(pg_dsn, min_size=1, max_size=1, server_settings={"jit": "on"})
    ours = await postgres_pool(pg_dsn, min_size=1, max_size=1)
    try:
        with caplog.at_level(logging.WARNING, logger="ujobs.postgres"):
            for pool in (jit_on, jit_on, ours):
                store = postgres_outbox_store(executor=pool)
                for _ in range(2):
                    await store.claim("relay", 10, now_ms=0, lease_ms=1_000)
        warned = [r for r in caplog.records if r.getMessage() == JIT_ON]
        assert len(warned) == 2  # once per store on the pool with JIT on, never on ours
        assert "server_settings={'jit': 'off'}" in warned[0].hint  # type: ignore[attr-defined]
    finally:
        await jit_on.close()
        await ours.close()


async def test_a_held_connection_whose_reset_fails_still_goes_back_to_the_pool(
    pg_dsn: str,
) -> None:
    """The full storm saw asyncpg fail ``reset jit`` with an ``InternalClientError`` ("cannot
    switch to state 15; another operation is in progress"), which is none of the interface
    errors: the connection was never given back and the pool's ``close()`` waited on it for
    good. Any failure of the reset now terminates the connection and gives it back. The failure
    is asyncpg's own error class raised where asyncpg raised it (the storm's interleaving is
    not reproducible on demand)."""
    pool = await asyncpg.create_pool(pg_dsn, min_size=1, max_size=1, server_settings={"jit": "on"})
    held = HeldConnections(pool)

    async def reset_fails(conn: Any) -> None:
        raise InternalClientError("cannot switch to state 15; another operation (2) is in progress")

    try:
        assert await held.run(lambda conn: conn.fetchval(JIT)) == "off"
        held._plans.restore = reset_fails  # type: ignore[method-assign]
        await held.close()
    finally:
        await asyncio.wait_for(pool.close(), timeout=60)
    assert pool.is_closing()
