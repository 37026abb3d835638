"""Events keep to their tenant on every edge, against a real ``ujobs api`` and a real
``ujobs worker``: an event published with tenant B's token (``POST /v1/events/{name}``,
request/reply on ``ujobs.events.<name>``, the stream's ``ujobs.js.events.<name>``) never
resumes tenant A's ``wait_for_event``, A's own token's does, and an operator's does.

No timing: B's event is published (and seen stored) BEFORE A's, and a wait answers the OLDEST
event that reaches it, so a B event that leaked would be the answer."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import asyncpg
import nats
import orjson
import pytest
from nats.aio.client import Client

from tests.e2e.service_process import ServiceProcess, service_env
from tests.services.nats_support import drop_streams, unique_prefix
from ujobs.drivers.postgres.driver import postgres_driver
from ujobs.services.api.tokens import TokenStore
from ujobs.services.nats.names import NatsNames

pytestmark = pytest.mark.slow

ORG_A = "org-a"
ORG_B = "org-b"
EVENT = "order.approved"
SCOPES = ("enqueue:*", "events:publish", "read")


@dataclass
class Stack:
    url: str
    http: aiohttp.ClientSession
    nc: Client
    names: NatsNames
    pool: asyncpg.Pool[Any]
    tokens: dict[str, str]

    async def post(self, path: str, who: str, body: Any) -> Any:
        headers = {"Authorization": f"Bearer {self.tokens[who]}"}
        async with self.http.post(self.url + path, json=body, headers=headers) as answer:
            assert answer.status == 202, await answer.text()
            return await answer.json()


@pytest.fixture
async def stack(pg_dsn: str, pg_pool: asyncpg.Pool[Any], nats_url: str) -> AsyncIterator[Stack]:
    names = NatsNames(unique_prefix())
    env = service_env(
        DATABASE_URL=pg_dsn,
        NATS_URL=nats_url,
        UJOBS_NATS_PREFIX=names.prefix,
        UJOBS_APP="tests.e2e.tenant_events_app:api",
    )
    store = TokenStore(pg_pool)
    tokens = {
        "a": (await store.create(tenant=ORG_A, scopes=SCOPES)).secret,
        "b": (await store.create(tenant=ORG_B, scopes=SCOPES)).secret,
        "operator": (await store.create(tenant=None, scopes=SCOPES)).secret,
    }
    api = await ServiceProcess.start("api", "--port", "0", env=env)
    worker = await ServiceProcess.start("worker", env=env)
    nc = await nats.connect(nats_url)
    try:
        listening = await api.log_event("ujobs.api.listening")
        await worker.log_event("ujobs.service.started")
        async with aiohttp.ClientSession() as http:
            yield Stack(
                url=f"http://{listening['addresses'][0]}",
                http=http,
                nc=nc,
                names=names,
                pool=pg_pool,
                tokens=tokens,
            )
    finally:
        await api.kill()
        await worker.kill()
        await drop_streams(nc, names)
        await nc.drain()


async def _until(check: Callable[[], Awaitable[bool]]) -> None:
    async with asyncio.timeout(60):
        while not await check():
            await asyncio.sleep(0.05)


async def _waiting(stack: Stack, order: str) -> str:
    """A's waiter for ``order``, enqueued with A's token and parked in its wait."""
    body = {"input": {"org_id": ORG_A, "order": order}}
    job_id: str = (await stack.post("/v1/jobs/await_approval", "a", body))["id"]
    driver = postgres_driver(stack.pool)

    async def parked() -> bool:
        row = await driver.introspect.get(job_id)
        return row is not None and row.state == "suspended"

    await _until(parked)
    return job_id


async def _stored(stack: Stack, payload: dict[str, Any]) -> None:
    """Until the event of ``payload`` is on the bus (the stream's publish is asynchronous)."""

    async def there() -> bool:
        found = await stack.pool.fetchval(
            "select count(*) from x_job_events where payload = $1::text::jsonb",
            orjson.dumps(payload).decode(),
        )
        return bool(found)

    await _until(there)


async def _answer(stack: Stack, job_id: str) -> Any:
    driver = postgres_driver(stack.pool)

    async def finished() -> bool:
        row = await driver.introspect.get(job_id)
        return row is not None and row.state in ("done", "dead", "failed")

    await _until(finished)
    row = await driver.introspect.get(job_id)
    assert row is not None
    assert row.state == "done", row.last_error
    steps = {s.name: s.output for s in await driver.load_steps(row.run_id, tenant_id=row.tenant_id)}
    return steps["approval"]


async def _http(stack: Stack, who: str, payload: dict[str, Any]) -> None:
    await stack.post(f"/v1/events/{EVENT}", who, {"payload": payload})


async def _request(stack: Stack, who: str, payload: dict[str, Any]) -> None:
    headers = {"Authorization": f"Bearer {stack.tokens[who]}"}
    data = orjson.dumps({"payload": payload})
    reply = await stack.nc.request(stack.names.event_subject(EVENT), data, 10, headers=headers)
    assert "error" not in orjson.loads(reply.data), reply.data


async def _stream(stack: Stack, who: str, payload: dict[str, Any]) -> None:
    headers = {"Authorization": f"Bearer {stack.tokens[who]}"}
    data = orjson.dumps({"payload": payload})
    await stack.nc.jetstream().publish(stack.names.js_event_subject(EVENT), data, headers=headers)


ROADS = {"http": _http, "nats-request": _request, "nats-stream": _stream}


@pytest.mark.parametrize("road", sorted(ROADS))
async def test_another_tenants_event_never_resumes_a_wait_its_own_tenants_does(
    stack: Stack, road: str
) -> None:
    publish = ROADS[road]
    job_id = await _waiting(stack, road)
    from_b = {"order": road, "by": "b"}
    await publish(stack, "b", from_b)
    await _stored(stack, from_b)
    from_a = {"order": road, "by": "a"}
    await publish(stack, "a", from_a)
    assert await _answer(stack, job_id) == from_a


async def test_an_operators_event_resumes_a_tenants_wait(stack: Stack) -> None:
    job_id = await _waiting(stack, "ops")
    await _http(stack, "operator", {"order": "ops", "by": "operator"})
    assert await _answer(stack, job_id) == {"order": "ops", "by": "operator"}
