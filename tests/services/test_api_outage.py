"""The api while its Postgres is away: every answer is a 202 or a 503 with an ``X_`` code and
``Retry-After``, never a 500 (issue 29's storm found 500s from the token lookup).

The Postgres here is PRIVATE (``tests/support/restartable.py``): it is restarted under load.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import pytest
from aiohttp import web
from prometheus_client import CollectorRegistry

from tests.services.api_support import ORG_A, Client, MakeClient, mail
from tests.support.restartable import PrivatePostgres, postgres_bin_dir
from ujobs.drivers.postgres.migrate import migrate
from ujobs.introspect import inspect_queues
from ujobs.metrics import JobMetrics
from ujobs.services.api.app import EDGE, create_app
from ujobs.services.api.common import json_ok
from ujobs.services.api.tokens import TokenStore
from ujobs.services.config.settings import ApiConfig

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


def api_app(url: str) -> web.Application:
    config = ApiConfig.load({"DATABASE_URL": url, "UJOBS_APP": "tests.unit.sample_app:api"})
    return create_app(config, metrics=JobMetrics(CollectorRegistry()))


async def live_api(aiohttp_client: MakeClient, url: str) -> Client:
    return await aiohttp_client(api_app(url))


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


async def queues_past_the_token(request: web.Request) -> web.Response:
    """``GET /v1/queues``'s own database call, without its token lookup before it."""
    driver = request.app[EDGE].driver
    return json_ok({"queues": await inspect_queues(driver, driver.clock.now_ms())})


async def test_every_database_call_of_a_route_answers_503_while_postgres_is_down(
    aiohttp_client: MakeClient, private_pg: PrivatePostgres
) -> None:
    token = await mint(private_pg.url, "admin")
    app = api_app(private_pg.url)
    app.router.add_get("/test/queues", queues_past_the_token)
    client = await aiohttp_client(app)
    auth = {"Authorization": f"Bearer {token}"}
    for path in ("/test/queues", "/v1/queues", "/readyz"):
        assert (await client.get(path, headers=auth)).status == 200
    await asyncio.to_thread(private_pg.stop)
    for path in ("/test/queues", "/v1/queues", "/readyz"):
        response = await client.get(path, headers=auth)
        body = await response.json()
        assert (response.status, body["error"]["code"]) in {(503, code) for code in OUTAGE_CODES}, (
            path,
            body,
        )
        assert response.headers.get("Retry-After") == "1", path
