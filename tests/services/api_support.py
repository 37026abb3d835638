"""The api under aiohttp's test client with the sample app, and tokens minted for it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import asyncpg
from aiohttp import web
from aiohttp.test_utils import TestClient
from prometheus_client import CollectorRegistry

from ujobs.clock import SYSTEM_CLOCK, Clock
from ujobs.metrics import JobMetrics
from ujobs.services.api.app import create_app
from ujobs.services.api.tokens import IssuedToken, TokenStore
from ujobs.services.config.settings import ApiConfig

Client = TestClient[web.Request, web.Application]
MakeClient = Callable[..., Awaitable[Client]]

ORG_A = "0b6c3f0e-8f5c-4f43-9d77-4b6a3a1c8e10"
ORG_B = "5d1a7c2e-2b1f-4a51-8f3e-9c6d2e4b7a01"


def mail(org: str = ORG_A, to: str = "a@example.com", subject: str = "hi") -> dict[str, str]:
    return {"to": to, "subject": subject, "org_id": org}


@dataclass
class Api:
    """A client of a live api app, and the store its tokens are minted in."""

    client: Client
    tokens: TokenStore
    pool: asyncpg.Pool[Any]

    async def token(self, *scopes: str, tenant: str | None = None, **extra: Any) -> str:
        issued = await self.issue(*scopes, tenant=tenant, **extra)
        return issued.secret

    async def issue(self, *scopes: str, tenant: str | None = None, **extra: Any) -> IssuedToken:
        return await self.tokens.create(tenant=tenant, scopes=scopes or ("admin",), **extra)

    async def call(
        self, method: str, path: str, token: str | None, body: Any = None, **kw: Any
    ) -> tuple[int, Any]:
        headers = {} if token is None else {"Authorization": f"Bearer {token}"}
        if body is not None:
            kw["json"] = body
        response = await self.client.request(method, path, headers=headers, **kw)
        return response.status, await response.json()

    async def jobs(self) -> list[asyncpg.Record]:
        return list(await self.pool.fetch("select * from x_jobs order by created_at, id"))


async def make_api(
    aiohttp_client: MakeClient,
    dsn: str,
    pool: asyncpg.Pool[Any],
    *,
    clock: Clock = SYSTEM_CLOCK,
    **env: str,
) -> Api:
    config = ApiConfig.load({"DATABASE_URL": dsn, "UJOBS_APP": "tests.unit.sample_app:api", **env})
    app = create_app(config, metrics=JobMetrics(CollectorRegistry()), clock=clock)
    client = await aiohttp_client(app)
    return Api(client=client, tokens=TokenStore(pool, clock=clock), pool=pool)
