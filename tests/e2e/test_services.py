"""The services as separate OS processes against real Postgres and Redis: ``ujobs api``,
``relay``, ``worker`` and ``scheduler``. Jobs enqueued through the outbox from this process
complete; then every service is SIGTERMed with work in flight and each exits 0 within its
drain budget, with nothing lost."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import asyncpg
import pytest

from tests.e2e import services_app
from tests.e2e.service_process import ServiceProcess, service_env
from ujobs.context import transaction
from ujobs.drivers.base import JobFilter
from ujobs.drivers.postgres.driver import postgres_driver
from ujobs.jobs.enqueue_target import set_jobs_facade
from ujobs.outbox import outbox_jobs_facade, postgres_outbox_store

pytestmark = pytest.mark.slow

DEADLINE_MS = 10_000
EXIT_GRACE_S = 5.0
FAST, SLOW = 20, 4


async def jobs_by_state(pool: asyncpg.Pool[Any], name: str) -> dict[str, int]:
    page = await postgres_driver(pool).introspect.list(JobFilter(name=name, limit=200))
    counts: dict[str, int] = {}
    for row in page.rows:
        counts[row.state] = counts.get(row.state, 0) + 1
    return counts


async def until(check: Any, timeout_s: float = 60) -> None:
    async with asyncio.timeout(timeout_s):
        while not await check():
            await asyncio.sleep(0.05)


async def test_services_run_jobs_then_drain_on_sigterm(
    pg_dsn: str, pg_pool: asyncpg.Pool[Any], redis_url: str
) -> None:
    env = service_env(
        DATABASE_URL=pg_dsn,
        REDIS_URL=redis_url,
        UJOBS_APP="tests.e2e.services_app:api",
        UJOBS_DRAIN_DEADLINE_MS=str(DEADLINE_MS),
        UJOBS_API_PORT="0",
        UJOBS_VISIBILITY_TIMEOUT_MS="5000",
    )
    commands = (("api",), ("relay",), ("worker", "--queues", "default"), ("scheduler",))
    services = [await ServiceProcess.start(*c, env=env) for c in commands]
    api, relay, worker, scheduler = services
    try:
        for service in services:
            await service.log_event("ujobs.service.started")
        listening = await api.log_event("ujobs.api.listening")
        url = f"http://{listening['addresses'][0]}/readyz"
        async with aiohttp.ClientSession() as http, http.get(url) as ready:
            assert ready.status == 200

        # Enqueue through the outbox, inside this process's transactions.
        store = postgres_outbox_store(executor=pg_pool)
        set_jobs_facade(outbox_jobs_facade(store=store, driver=postgres_driver(pg_pool)))
        enqueued = []
        for batch in range(FAST // 5):
            async with pg_pool.acquire() as conn, transaction(conn):
                for n in range(5):
                    order = f"fast-{batch}-{n}"
                    enqueued.append(
                        await services_app.process_order.enqueue({"order": order, "ms": 0})
                    )

        async def all_fast_done() -> bool:
            return (await jobs_by_state(pg_pool, "process_order")).get("done", 0) == FAST

        await until(all_fast_done)

        async def ticked() -> bool:
            return (await jobs_by_state(pg_pool, "tick")).get("done", 0) >= 1

        await until(ticked)

        # Work in flight at the SIGTERM: slow jobs, one of them running.
        async with pg_pool.acquire() as conn, transaction(conn):
            for n in range(SLOW):
                enqueued.append(
                    await services_app.process_order.enqueue({"order": f"slow-{n}", "ms": 1500})
                )

        async def one_started() -> bool:  # a body is running (its first progress landed)
            page = await postgres_driver(pg_pool).introspect.list(
                JobFilter(name="process_order", state="running")
            )
            return any(row.progress is not None for row in page.rows)

        await until(one_started)
        for service in services:
            service.terminate()
        codes = {s.name: await s.exit_code(DEADLINE_MS / 1000 + EXIT_GRACE_S) for s in services}
    finally:
        for service in services:
            await service.kill()

    assert codes == {"api": 0, "relay": 0, "worker": 0, "scheduler": 0}
    for service in services:
        [stopped] = service.events("ujobs.service.stopped")
        assert stopped["exit_code"] == 0
        assert not service.events("jobs.worker.drain-abandoned")
    assert worker.events("jobs.lifecycle.drained")
    assert relay.out[0].startswith("ujobs relay: publishing")
    del scheduler

    # Nothing lost: every enqueued job is a row (or still staged), none left running or dead.
    driver = postgres_driver(pg_pool)
    rows = {r.id: r for r in (await driver.introspect.list(JobFilter(limit=200))).rows}
    staged = await store.pending()
    ids = [e.id for e in enqueued]
    assert len(set(ids)) == FAST + SLOW
    missing = [i for i in ids if i not in rows]
    assert len(missing) <= staged
    states = {rows[i].state for i in ids if i in rows}
    assert states <= {"done", "ready"}, states
    assert all(rows[e.id].state == "done" for e in enqueued[:FAST])
    # The run that was in flight let its step land and was handed back (or finished): its
    # saved step replays on the next claim instead of running again.
    slow = [rows[e.id] for e in enqueued[FAST:] if e.id in rows]
    progressed = [
        r
        for r in slow
        if r.state == "done" or await driver.load_steps(r.run_id, tenant_id=r.tenant_id)
    ]
    assert progressed, [(r.state, r.attempt) for r in slow]
