"""The api with its NATS edge on (a prefix of the test's own), a NATS client, and tokens."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import asyncpg
import nats
import orjson
from nats.aio.client import Client

from services.nats.names import NatsNames
from tests.services.api_support import Api, MakeClient, make_api


def unique_prefix() -> str:
    return f"t{uuid.uuid4().hex[:12]}"


@dataclass
class NatsApi:
    """A live api whose NATS edge listens under ``names``, and a client of the same NATS."""

    api: Api
    nc: Client
    names: NatsNames

    async def token(self, *scopes: str, tenant: str | None = None) -> str:
        return await self.api.token(*scopes, tenant=tenant)

    async def request(
        self, subject: str, body: Any, token: str | None, *, raw: bytes | None = None
    ) -> Any:
        headers = {} if token is None else {"Authorization": f"Bearer {token}"}
        data = raw if raw is not None else orjson.dumps(body)
        reply = await self.nc.request(subject, data, timeout=10, headers=headers)
        return orjson.loads(reply.data)

    async def jobs(self) -> list[asyncpg.Record]:
        return await self.api.jobs()


async def start_nats_api(
    aiohttp_client: MakeClient, dsn: str, pool: asyncpg.Pool[Any], nats_url: str
) -> AsyncIterator[NatsApi]:
    prefix = unique_prefix()
    api = await make_api(aiohttp_client, dsn, pool, NATS_URL=nats_url, UJOBS_NATS_PREFIX=prefix)
    nc = await nats.connect(nats_url)
    try:
        yield NatsApi(api=api, nc=nc, names=NatsNames(prefix))
    finally:
        await nc.drain()
