"""Held connections: reused for hot statements, capped, handed back when idle, on a
cancellation and on close, so a pool is never left waiting on the driver."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import pytest

from shared.drivers.postgres_conns import HeldConnections, ended
from shared.drivers.postgres_pool import postgres_pool


async def backend(conn: Any) -> int:
    return int(await conn.fetchval("select pg_backend_pid()"))


async def test_reuses_one_connection_and_caps_how_many_it_holds(pg_dsn: str) -> None:
    pool = await postgres_pool(pg_dsn, min_size=1, max_size=4)
    held = HeldConnections(pool, max_held=2)
    try:
        first = await held.run(backend)
        assert await held.run(backend) == first
        assert pool.get_idle_size() + 1 == pool.get_size()

        async def slow(conn: Any) -> int:
            await conn.execute("select pg_sleep(0.05)")
            return await backend(conn)

        pids = await asyncio.gather(*(held.run(slow) for _ in range(4)))
        assert len(set(pids)) == 4  # two held, two more through the pool
        with pytest.raises(asyncpg.UndefinedTableError):
            await held.run(lambda conn: conn.fetch("select * from no_such_table"))
        assert await held.run(backend) in pids  # a failed statement keeps the connection
    finally:
        await held.close()
        await asyncio.wait_for(pool.close(), 5)


async def test_a_cancelled_statement_gives_its_connection_back(pg_dsn: str) -> None:
    pool = await postgres_pool(pg_dsn, min_size=1, max_size=2)
    held = HeldConnections(pool, max_held=1)
    try:
        task = asyncio.create_task(held.run(lambda conn: conn.execute("select pg_sleep(5)")))
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await held.run(lambda conn: conn.fetchval("select 1")) == 1
    finally:
        await held.close()
        await asyncio.wait_for(pool.close(), 5)


async def test_idle_connections_go_back_to_the_pool_without_close(pg_dsn: str) -> None:
    pool = await postgres_pool(pg_dsn, min_size=1, max_size=2)
    held = HeldConnections(pool)
    await held.run(backend)
    # Nobody closes `held`: the pool still closes, once the idle connection went back.
    await asyncio.wait_for(pool.close(), 5)


async def test_a_connection_the_server_ended_is_replaced(pg_dsn: str) -> None:
    pool = await postgres_pool(pg_dsn, min_size=1, max_size=2)
    held = HeldConnections(pool, max_held=1)
    admin = await asyncpg.connect(pg_dsn)
    try:
        victim = await held.run(backend)
        await admin.execute("select pg_terminate_backend($1)", victim)
        for _ in range(50):  # the client notices the closed socket on its own
            await asyncio.sleep(0.02)
            if pool.get_idle_size() == 0 and held._idle and ended(held._idle[-1][0]):
                break
        pid = await held.run(backend)
        assert pid != victim
    finally:
        await admin.close()
        await held.close()
        await asyncio.wait_for(pool.close(), 5)


async def test_a_proxy_the_pool_took_back_counts_as_ended(pg_dsn: str) -> None:
    # asyncpg detaches the proxy of a connection it saw end; is_closed() then raises.
    pool = await postgres_pool(pg_dsn, min_size=1, max_size=1)
    try:
        proxy = await pool.acquire()
        assert not ended(proxy)
        await pool.release(proxy)
        with pytest.raises(asyncpg.InterfaceError):
            proxy.is_closed()
        assert ended(proxy)
    finally:
        await asyncio.wait_for(pool.close(), 5)
