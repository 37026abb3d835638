"""The api while its Postgres is away: every answer is a 202 or a 503 with an ``X_`` code and
``Retry-After``, never a 500 (issue 29's storm found 500s from the token lookup).

The Postgres here is PRIVATE (``tests/fixtures/restartable.py``): it is restarted under load.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import pytest
from prometheus_client import CollectorRegistry

from services.api import create_app
from services.config import ApiConfig
from services.tokens import TokenStore
from shared.drivers.postgres.migrate import migrate
from shared.metrics import JobMetrics
from tests.fixtures.restartable import PrivatePostgres, postgres_bin_dir
from tests.services.api_support import ORG_A, Client, MakeClient, mail

OUTAGE_CODES = {"X_DRIVER_UNREACHABLE", "X_DRIVER_UNAVAILABLE"}


@pytest.fixture
async def private_pg() -> AsyncIterator[PrivatePostgres]:
    try:
        postgres_bin_dir()
    except RuntimeError as exc:
        pytest.skip(str(exc))
    pg = PrivatePostgres(settings={"fsync": "off"})
    await asyncio.to_thread(pg.start)
    try:
        conn = await asyncpg.connect(pg.url)
        try:
            await migrate(conn)
        finally:
            await conn.close()
        yield pg
    finally:
        await asyncio.to_thread(pg.__exit__, None, None, None)


async def mint(url: str, *scopes: str, tenant: str | None = None) -> str:
    pool = await asyncpg.create_pool(url, min_size=1, max_size=1)
    try:
        issued = await TokenStore(pool).create(tenant=tenant, scopes=scopes)
    finally:
        await pool.close()
    return issued.secret


async def live_api(aiohttp_client: MakeClient, url: str) -> Client:
    config = ApiConfig.load({"DATABASE_URL": url, "UJOBS_APP": "tests.unit.sample_app:api"})
    return await aiohttp_client(create_app(config, metrics=JobMetrics(CollectorRegistry())))


@dataclass
class Answers:
    """Every answer the load got: (status, body, Retry-After)."""

    seen: list[tuple[int, Any, str | None]] = field(default_factory=list)

    def statuses(self) -> set[int]:
        return {status for status, _, _ in self.seen}

    def refused(self) -> list[tuple[int, Any, str | None]]:
        """Every answer that is not a 202, or a 503 with an outage code and Retry-After."""
        return [
            (status, body, retry)
            for status, body, retry in self.seen
            if status != 202
            and not (
                status == 503
                and body.get("error", {}).get("code") in OUTAGE_CODES
                and retry is not None
                and int(retry) >= 1
            )
        ]


async def enqueue_until(
    client: Client, token: str, stop: asyncio.Event, answers: Answers, worker: int
) -> None:
    n = 0
    while not stop.is_set():
        n += 1
        body = {"input": mail(to=f"w{worker}-{n}@example.com")}
        response = await client.post(
            "/v1/jobs/send_mail", json=body, headers={"Authorization": f"Bearer {token}"}
        )
        answers.seen.append(
            (response.status, await response.json(), response.headers.get("Retry-After"))
        )
        if response.status != 202:
            await asyncio.sleep(0.005)  # a client backing off a little, as Retry-After asks


async def test_enqueues_answer_202_or_503_while_postgres_restarts(
    aiohttp_client: MakeClient, private_pg: PrivatePostgres
) -> None:
    token = await mint(private_pg.url, "enqueue:*", tenant=ORG_A)
    client = await live_api(aiohttp_client, private_pg.url)
    answers = Answers()
    stop = asyncio.Event()
    load = [
        asyncio.create_task(enqueue_until(client, token, stop, answers, worker))
        for worker in range(8)
    ]
    try:
        for restart in range(2):
            before = len(answers.seen)
            while len(answers.seen) < before + 40:  # load flowing before each restart
                await asyncio.sleep(0.01)
            await asyncio.to_thread(private_pg.restart)
            back = time.monotonic() + 20
            while not any(s == 202 for s, _, _ in answers.seen[-8:]):
                assert time.monotonic() < back, f"no 202 after restart {restart}"
                await asyncio.sleep(0.01)
    finally:
        stop.set()
        await asyncio.gather(*load)
    assert answers.refused() == []
    assert 503 in answers.statuses()  # the restarts were felt
    accepted = {body["id"] for status, body, _ in answers.seen if status == 202}
    conn = await asyncpg.connect(private_pg.url)
    try:
        stored = {row["id"] for row in await conn.fetch("select id from x_jobs")}
    finally:
        await conn.close()
    assert accepted <= stored  # every 202 names a committed row
