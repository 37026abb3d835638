"""Held connections: reused for hot statements, capped, handed back when idle, on a
cancellation and on close, so a pool is never left waiting on the driver; a connection that saw
the server end its session is never handed out again, and an unreachable server leaves the
driver as X_DRIVER_UNREACHABLE."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import pytest

from tests.support.pg_relay import PgRelay
from tests.support.servers import free_port
from ujobs.drivers.postgres.driver import postgres_driver
from ujobs.drivers.postgres.held_connections import HeldConnections, ended
from ujobs.drivers.postgres.pool import postgres_pool
from ujobs.errors import DriverUnreachableError


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


async def test_a_connection_that_read_its_fatal_is_never_handed_out_again(pg_dsn: str) -> None:
    # A restart ends every session: each idle held connection READS its FATAL, and sees the
    # close only a turn later. The relay holds the close back, so the gap lasts.
    relay = await PgRelay(pg_dsn).start()
    relay.hold_close = True
    pool = await postgres_pool(relay.dsn, min_size=0, max_size=4)
    held = HeldConnections(pool, max_held=2)
    admin = await asyncpg.connect(pg_dsn)
    try:

        async def overlapping(conn: Any) -> int:
            await conn.execute("select pg_sleep(0.05)")
            return await backend(conn)

        victims = set(await asyncio.gather(held.run(overlapping), held.run(overlapping)))
        assert len(victims) == 2
        await admin.execute("select pg_terminate_backend(pid) from unnest($1::int[]) pid", victims)
        await relay.until_withheld(2)
        await asyncio.sleep(0)  # the client reads what the relay forwarded
        # The first statement meets a connection that read its FATAL, unavoidably (nothing
        # public says so before it is used): it fails as the store being unreachable...
        with pytest.raises(DriverUnreachableError) as info:
            await held.run(backend)
        assert info.value.meta["cause"] == "InternalClientError"
        # ...and it, and the other idle one that read its FATAL too, are never used again.
        assert {await held.run(backend), await held.run(backend)}.isdisjoint(victims)
    finally:
        await admin.close()
        await held.close()
        await relay.close()
        pool.terminate()


async def test_the_driver_says_unreachable_when_postgres_does_not_answer() -> None:
    from ujobs.drivers.base import ClaimOptions, ClaimRef, EnqueueRequest, NackOptions

    pool = await asyncpg.create_pool(
        f"postgresql://postgres@127.0.0.1:{free_port()}/nowhere", min_size=0, max_size=1
    )
    driver = postgres_driver(pool)
    ref = ClaimRef("w", 1)
    calls = {
        "enqueue": driver.enqueue(EnqueueRequest(name="j", input={}, idempotency_key="k")),
        "claim": driver.claim(ClaimOptions(queues=["q"], limit=1, worker_id="w")),
        "ack": driver.ack("j", ref),
        "nack": driver.nack("j", ref, NackOptions(error="x")),
        "heartbeat": driver.heartbeat("j", ref, 1_000),
        "load_steps": driver.load_steps("r", tenant_id=None),
        "save_step": driver.save_step("j", ref, "r", "s", 1, started_at_ms=0),
    }
    try:
        for name, call in calls.items():
            with pytest.raises(DriverUnreachableError) as info:
                await call
            assert (info.value.code, info.value.meta) == (
                "X_DRIVER_UNREACHABLE",
                {"driver": "postgres", "cause": "ConnectionRefusedError"},
            ), name
    finally:
        await driver.close()
        await pool.close()
