"""The Postgres result waits' LISTEN session: one pooled connection held while any wait is open
and handed back after the last; a session terminated under open waits rings them, and the next
wait dials a new one that hears the settle."""

from __future__ import annotations

from typing import Any

import asyncpg

from tests.support.conformance import claim_one, req
from ujobs.drivers.postgres import postgres_driver
from ujobs.drivers.postgres.results import SETTLED_CHANNEL

HANG_S = 20.0


async def listeners(pool: asyncpg.Pool[Any]) -> list[int]:
    rows = await pool.fetch(
        "select pid from pg_stat_activity where datname = current_database() and query like $1",
        f"%LISTEN%{SETTLED_CHANNEL}%",
    )
    return [r["pid"] for r in rows]


async def test_one_session_for_many_waits_and_none_after_them(pg_pool: asyncpg.Pool[Any]) -> None:
    driver = postgres_driver(pg_pool)
    results = driver.results
    await driver.enqueue(req(key="a"))
    await driver.enqueue(req(key="b"))
    first = await claim_one(driver)
    async with results.listen(first.id), results.listen("other-id"):
        assert results.listening()
        assert len(await listeners(pg_pool)) == 1
    assert not results.listening()
    await driver.close()


async def test_a_terminated_session_rings_its_waits_and_the_next_wait_dials_again(
    pg_pool: asyncpg.Pool[Any],
) -> None:
    driver = postgres_driver(pg_pool)
    results = driver.results
    await driver.enqueue(req())
    job = await claim_one(driver)
    async with results.listen(job.id) as ticket:
        await results.watch(job.id)
        (pid,) = await listeners(pg_pool)
        await pg_pool.execute("select pg_terminate_backend($1)", pid)
        assert await ticket.wait(HANG_S), "the dropped session rang the wait"
        await ticket.rearm()  # what wait_settled does before it reads the row again
        assert results.listening()
        assert [p for p in await listeners(pg_pool) if p != pid] != [], "a new session"
        row = await results.watch(job.id)
        assert row is not None
        assert row.state == "running"
        assert await driver.ack(job.id, job.ref, result='"late"')
        assert await ticket.wait(HANG_S), "the new session heard the ack"
    row = await results.read(job.id)
    assert row is not None
    assert row.result == "late"
    await driver.close()
