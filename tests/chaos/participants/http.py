"""The HTTP edge: two ``ujobs api`` processes on fixed ports (a replacement listens where the
killed one did), enqueuing ``storm.work`` with an admin token; the storm SIGKILLs them.
Acknowledged means a 202 with the job's id; every other answer is counted by status."""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import TYPE_CHECKING, Any

import aiohttp

from tests.chaos.fleet import Role, service_env
from tests.chaos.participant import StormContext
from tests.support.servers import free_port
from ujobs.services.api.tokens import TokenStore

if TYPE_CHECKING:
    from tests.chaos.fleet import Member

APIS = 2


class HttpEnqueue:
    name = "http"

    def __init__(self) -> None:
        self.ports = [free_port() for _ in range(APIS)]
        self.statuses: dict[str, int] = {}

    def fleet_env(self) -> dict[str, str]:
        return {}

    def roles(self, ctx: StormContext) -> list[tuple[Role, int]]:
        return [
            (Role(f"api-{i}", ("api", "--port", str(port)), service_env(ctx.url)), 1)
            for i, port in enumerate(self.ports)
        ]

    async def ready(self, ctx: StormContext) -> None:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as http:
            for port in self.ports:
                while True:
                    try:
                        async with http.get(f"http://127.0.0.1:{port}/healthz") as reply:
                            if reply.status == 200:
                                break
                    except (TimeoutError, aiohttp.ClientError):
                        pass
                    await asyncio.sleep(0.2)

    async def victims(self, ctx: StormContext) -> list[Member]:
        return [m for m in ctx.fleet.alive() if m.role.name.startswith("api-")]

    async def load(self, ctx: StormContext) -> None:
        token = await TokenStore(ctx.pool).create(tenant=None, scopes=["admin"], name="storm")
        headers = {"Authorization": f"Bearer {token.secret}"}
        urls = itertools.cycle(f"http://127.0.0.1:{p}/v1/jobs/storm.work" for p in self.ports)
        timeout = aiohttp.ClientTimeout(total=10)
        async with aiohttp.ClientSession(headers=headers, timeout=timeout) as http:
            n = 0
            while await ctx.pace():
                body = {"input": {"src": self.name, "n": n, "at_ms": int(time.time() * 1000)}}
                n += 1
                try:
                    async with http.post(next(urls), json=body) as reply:
                        status = str(reply.status)
                        answer = await reply.json() if reply.status == 202 else None
                except (TimeoutError, aiohttp.ClientError):
                    status = "refused"  # an api killed or starting: not acknowledged
                    answer = None
                self.statuses[status] = self.statuses.get(status, 0) + 1
                if answer is None:
                    ctx.error(self.name)
                else:
                    ctx.ack(self.name, answer["id"])

    async def check(self, ctx: StormContext) -> dict[str, Any]:
        return {"http_statuses": dict(sorted(self.statuses.items()))}
