"""Python-driver enqueues (``postgres_driver(pool).enqueue``) straight from this process:
acknowledged means the driver answered the job's id."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from tests.chaos import storm_app
from tests.chaos.participant import StormContext
from ujobs.drivers.postgres import postgres_driver

if TYPE_CHECKING:
    from tests.chaos.fleet import Member, Role


class DirectEnqueue:
    name = "direct"

    def fleet_env(self) -> dict[str, str]:
        return {}

    def roles(self, ctx: StormContext) -> list[tuple[Role, int]]:
        return []

    async def ready(self, ctx: StormContext) -> None:
        return None

    async def victims(self, ctx: StormContext) -> list[Member]:
        return []

    async def load(self, ctx: StormContext) -> None:
        driver = postgres_driver(ctx.pool)
        n = 0
        while await ctx.pace():
            request = storm_app.work.request(
                {"src": self.name, "n": n, "at_ms": int(time.time() * 1000)}
            )
            n += 1
            try:
                answer = await driver.enqueue(request)
            except Exception:  # Postgres restarting: not acknowledged, not counted
                ctx.error(self.name)
                continue
            ctx.ack(self.name, answer.id)

    async def check(self, ctx: StormContext) -> dict[str, Any]:
        return {}
