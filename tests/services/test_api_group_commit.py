"""Group commit of single enqueues: requests that arrive while a statement runs share the
next one; each answer comes after its own row committed; a refused request in a group fails
alone."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

import asyncpg
import pytest

from tests.services.api_support import ORG_A, MakeClient, mail, make_api
from ujobs.drivers.base import Enqueued, EnqueueRequest
from ujobs.drivers.postgres import PostgresDriver, postgres_driver
from ujobs.errors import InvariantError
from ujobs.services.api.enqueue_batcher import EnqueueBatcher


class GatedDriver:
    """The Postgres driver, holding every statement until ``gate`` opens; records batches."""

    def __init__(self, inner: PostgresDriver) -> None:
        self.inner = inner
        self.gate = asyncio.Event()
        self.batches: list[int] = []

    async def enqueue(self, request: EnqueueRequest) -> Enqueued:
        self.batches.append(1)
        await self.gate.wait()
        return await self.inner.enqueue(request)

    async def enqueue_many(self, requests: Iterable[EnqueueRequest]) -> list[Enqueued]:
        batch = list(requests)
        self.batches.append(len(batch))
        await self.gate.wait()
        return await self.inner.enqueue_many(batch)


def request(n: int, **extra: Any) -> EnqueueRequest:
    return EnqueueRequest(name="send_mail", input={"n": n}, idempotency_key=f"k{n}", **extra)


async def test_waiting_requests_share_one_statement_and_answer_after_their_commit(
    pg_pool: asyncpg.Pool[Any],
) -> None:
    driver = GatedDriver(postgres_driver(pg_pool))
    batcher = EnqueueBatcher(driver, max_in_flight=1)  # type: ignore[arg-type]
    committed: dict[str, bool] = {}

    async def one(n: int) -> Enqueued:
        answer = await batcher.enqueue(request(n))
        seen = await pg_pool.fetchval("select count(*) from x_jobs where id = $1", answer.id)
        committed[answer.id] = seen == 1
        return answer

    tasks = [asyncio.create_task(one(n)) for n in range(10)]
    await asyncio.sleep(0.05)
    # Nothing answered while the statements are held: no 202 before a commit.
    assert not any(t.done() for t in tasks)
    assert driver.batches == [1]
    driver.gate.set()
    answers = await asyncio.gather(*tasks)
    assert driver.batches == [1, 9]
    assert batcher.statements == 2
    assert len({a.id for a in answers}) == 10
    assert all(committed.values())
    assert await pg_pool.fetchval("select count(*) from x_jobs") == 10
    await batcher.close()


async def test_a_refused_request_in_a_group_fails_alone(pg_pool: asyncpg.Pool[Any]) -> None:
    driver = GatedDriver(postgres_driver(pg_pool))
    batcher = EnqueueBatcher(driver, max_in_flight=1)  # type: ignore[arg-type]
    first = asyncio.create_task(batcher.enqueue(request(0)))
    await asyncio.sleep(0.01)
    group = [
        asyncio.create_task(batcher.enqueue(request(n, max_attempts=0 if n == 3 else 3)))
        for n in range(1, 6)
    ]
    await asyncio.sleep(0.01)
    driver.gate.set()
    results = await asyncio.gather(first, *group, return_exceptions=True)
    assert isinstance(results[3], InvariantError)
    assert [isinstance(r, Enqueued) for r in results] == [True, True, True, False, True, True]
    # The group's statement failed as a whole, then each request ran alone.
    assert driver.batches == [1, 5, 1, 1, 1, 1, 1]
    keys = {r["idempotency_key"] for r in await pg_pool.fetch("select * from x_jobs")}
    assert keys == {"k0", "k1", "k2", "k4", "k5"}


async def test_a_cancelled_waiter_leaves_its_group_s_statement_alone(
    pg_pool: asyncpg.Pool[Any],
) -> None:
    """A client hanging up cancels its handler: the group's statement still runs, the others
    of the group get their answers and the cancelled request's row lands all the same."""
    driver = GatedDriver(postgres_driver(pg_pool))
    batcher = EnqueueBatcher(driver, max_in_flight=1)  # type: ignore[arg-type]
    first = asyncio.create_task(batcher.enqueue(request(0)))
    await asyncio.sleep(0.01)
    group = [asyncio.create_task(batcher.enqueue(request(n))) for n in range(1, 4)]
    await asyncio.sleep(0.01)
    group[1].cancel()
    driver.gate.set()
    results = await asyncio.gather(first, *group, return_exceptions=True)
    assert isinstance(results[2], asyncio.CancelledError)
    assert [isinstance(r, Enqueued) for r in results] == [True, True, False, True]
    await batcher.close()
    assert driver.batches == [1, 3]
    keys = {r["idempotency_key"] for r in await pg_pool.fetch("select * from x_jobs")}
    assert keys == {"k0", "k1", "k2", "k3"}


async def test_an_idle_request_goes_at_once_alone(pg_pool: asyncpg.Pool[Any]) -> None:
    driver = GatedDriver(postgres_driver(pg_pool))
    driver.gate.set()
    batcher = EnqueueBatcher(driver)  # type: ignore[arg-type]
    await batcher.enqueue(request(1))
    await batcher.enqueue(request(2))
    assert driver.batches == [1, 1]


def test_bounds_are_checked(pg_pool: asyncpg.Pool[Any]) -> None:
    with pytest.raises(InvariantError):
        EnqueueBatcher(postgres_driver(pg_pool), max_batch=0)


async def test_concurrent_http_enqueues_all_land_each_once(
    aiohttp_client: MakeClient, pg_dsn: str, pg_pool: asyncpg.Pool[Any]
) -> None:
    api = await make_api(aiohttp_client, pg_dsn, pg_pool)
    token = await api.token("enqueue:*", tenant=ORG_A)
    calls = [
        api.call("POST", "/v1/jobs/send_mail", token, {"input": mail(to=f"{n % 40}@x.io")})
        for n in range(80)
    ]
    answers = await asyncio.gather(*calls)
    assert {status for status, _ in answers} == {202}
    ids = {body["id"] for _, body in answers}
    assert len(ids) == 40
    assert sum(not body["deduped"] for _, body in answers) == 40
    assert await pg_pool.fetchval("select count(*) from x_jobs") == 40
