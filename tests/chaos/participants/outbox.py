"""The transactional outbox: a business row (``storm_orders``) and its staged job commit in one
transaction; two ``ujobs relay`` processes publish them and are SIGKILLed by the storm.

``outbox_lost``: a committed order whose job never became a row; ``outbox_doubled``: an order
whose job became more than one row (or ran its body to the end twice: counted by the core's
``completed_twice``)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from tests.chaos import storm_app
from tests.chaos.fleet import Role, service_env
from tests.chaos.participant import StormContext
from ujobs.outbox import postgres_outbox_store

if TYPE_CHECKING:
    from tests.chaos.fleet import Member

RELAYS = 2

ORDER_ROWS = """
select o.id, count(j.id) as rows
  from storm_orders o
  left join x_jobs j on j.name = 'storm.work' and j.idempotency_key = o.id
 group by o.id
"""


class OutboxEnqueue:
    name = "outbox"

    def fleet_env(self) -> dict[str, str]:
        return {}

    def roles(self, ctx: StormContext) -> list[tuple[Role, int]]:
        env = service_env(ctx.url, UJOBS_OUTBOX_CLAIM_LEASE_MS="2000")
        return [(Role("relay", ("relay",), env), RELAYS)]

    async def ready(self, ctx: StormContext) -> None:
        return None

    async def victims(self, ctx: StormContext) -> list[Member]:
        return ctx.fleet.alive("relay")

    async def load(self, ctx: StormContext) -> None:
        store = postgres_outbox_store(executor=ctx.pool)
        n = 0
        while await ctx.pace():
            order = f"{self.name}:{n}"
            request = storm_app.work.request(
                {"src": self.name, "n": n, "at_ms": int(time.time() * 1000)}
            )
            n += 1
            try:
                async with ctx.pool.acquire() as conn, conn.transaction():
                    staged = await store.stage(conn, [request])
                    await conn.execute(
                        "insert into storm_orders (id, job_id) values ($1, $2)", order, staged[0].id
                    )
            except Exception:  # Postgres restarting: rolled back (or unknown: the table says)
                ctx.error(self.name)
                continue
            ctx.ack(self.name, staged[0].id)

    async def check(self, ctx: StormContext) -> dict[str, Any]:
        rows = await ctx.pool.fetch(ORDER_ROWS)
        return {
            "outbox_orders": len(rows),
            "outbox_lost": sum(1 for r in rows if r["rows"] == 0),
            "outbox_doubled": sum(r["rows"] - 1 for r in rows if r["rows"] > 1),
            "outbox_unpublished": await ctx.pool.fetchval(
                "select count(*) from x_outbox where published_at is null"
            ),
        }
