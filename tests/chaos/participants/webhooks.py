"""Webhooks: events published to two endpoints of a local partner (a real aiohttp server in this
process: the outside world is the one thing the storm fakes), delivered by two
``ujobs webhook-deliverer`` processes the storm SIGKILLs, mid-POST or between the POST and its
ledger row.

A delivery is at least once: a deliverer killed after the partner answered sends it again, so
the partner may see an event twice. What must hold is the ledger's word:
``webhook_ledger_double_counted`` is, for each (endpoint, event), the ``delivered`` rows beyond
what the partner received — a success the ledger records that did not happen, or one it counts
twice. ``webhook_deliveries_lost``: an acknowledged delivery the partner never received;
``webhook_ledger_missing``: a delivery done with no ``delivered`` row (the deliverer writes
successes in batches of a few milliseconds: a kill in between loses the row, never invents
one); ``webhook_redelivered``: receipts beyond one (bounded by the kills);
``webhook_signatures_invalid``: receipts whose signature does not verify under the endpoint's
secret (the partner's own check).
"""

from __future__ import annotations

import asyncio
import base64
import os
import time
from collections import Counter
from typing import TYPE_CHECKING, Any

import orjson

from tests.chaos.fleet import Role, service_env
from tests.chaos.participant import StormContext
from tests.support.webhook_receiver import Receiver
from ujobs.drivers.postgres import postgres_driver
from ujobs.webhooks.builtin import GLOBAL_FAMILY, deliver_global
from ujobs.webhooks.errors import WebhookSignatureInvalidError
from ujobs.webhooks.family import fan_out_inputs
from ujobs.webhooks.secrets import SecretBox
from ujobs.webhooks.signature import STANDARD_ID_HEADER, verify_standard
from ujobs.webhooks.ssrf import GuardPolicy
from ujobs.webhooks.store_pg import PgWebhookStore

if TYPE_CHECKING:
    from tests.chaos.fleet import Member

DELIVERERS = 2
ENDPOINTS = 2
TOPIC = "storm.hook"
SETTLE_S = 120.0
TOLERANCE_S = 3_600
"""The checks run minutes after the receipts: the timestamp's freshness is not what is checked."""
ALLOW_PRIVATE = "127.0.0.1/32"
DELIVERIES = "select id, state, input from x_jobs where name = $1"
DELIVERED_ROWS = (
    "select endpoint_id, event_id, count(*) as n from x_webhook_deliveries"
    " where outcome = 'delivered' group by 1, 2"
)
UNSETTLED = (
    "select count(*) from x_jobs where name = $1"
    " and state <> all(array['done', 'failed', 'dead', 'cancelled'])"
)


class WebhookDeliveries:
    name = "webhooks"

    def __init__(self) -> None:
        self.key = base64.b64encode(os.urandom(32)).decode()
        self.partner = Receiver()
        self.acked: list[str] = []
        self.errors = 0
        self.endpoints: dict[str, str] = {}
        """The partner's path → the endpoint id delivering to it."""
        self.secrets: dict[str, str] = {}
        """The partner's path → the endpoint's signing secret."""

    def fleet_env(self) -> dict[str, str]:
        return {}

    def roles(self, ctx: StormContext) -> list[tuple[Role, int]]:
        env = service_env(
            ctx.url,
            UJOBS_SECRET_KEY=self.key,
            UJOBS_WEBHOOK_ALLOW_PRIVATE=ALLOW_PRIVATE,
            UJOBS_WEBHOOK_ALLOW_HTTP="1",
            UJOBS_VISIBILITY_TIMEOUT_MS="3000",
        )
        return [(Role("webhook-deliverer", ("webhook-deliverer",), env), DELIVERERS)]

    async def ready(self, ctx: StormContext) -> None:
        return None

    async def victims(self, ctx: StormContext) -> list[Member]:
        return ctx.fleet.alive("webhook-deliverer")

    async def load(self, ctx: StormContext) -> None:
        await self.partner.start()
        policy = GuardPolicy.parse(ALLOW_PRIVATE, allow_http=True)
        store = PgWebhookStore(ctx.pool, SecretBox.parse(self.key), policy=policy)
        for i in range(ENDPOINTS):
            created = await store.add_endpoint(
                self.partner.url(f"/hook/{i}"), topics=[TOPIC], endpoint_id=f"ep_storm_{i}"
            )
            self.endpoints[f"/hook/{i}"] = created.id
            self.secrets[f"/hook/{i}"] = created.secret
        driver = postgres_driver(ctx.pool)
        n = 0
        while await ctx.pace():
            body = f'{{"n": {n}, "at_ms": {int(time.time() * 1000)}, "s": "ü 💥"}}'
            n += 1
            try:
                event, pairs = await store.store_event(TOPIC, body, tenant=None)
                requests = [deliver_global.request(i) for i in fan_out_inputs(event, pairs)]
                answers = await driver.enqueue_many(requests)
            except Exception:  # Postgres restarting: not acknowledged
                self.errors += 1
                continue
            self.acked += [a.id for a in answers]

    async def _settled(self, ctx: StormContext) -> bool:
        deadline = time.monotonic() + SETTLE_S
        while time.monotonic() < deadline:
            if await ctx.pool.fetchval(UNSETTLED, GLOBAL_FAMILY) == 0:
                return True
            await asyncio.sleep(0.5)
        return False

    async def check(self, ctx: StormContext) -> dict[str, Any]:
        try:
            settled = await self._settled(ctx)
        finally:
            await self.partner.stop()
        receipts: Counter[tuple[str, str]] = Counter(
            (
                self.endpoints.get(r.path, r.path),
                {k.lower(): v for k, v in r.headers.items()}.get(STANDARD_ID_HEADER, ""),
            )
            for r in self.partner.requests
        )
        ledger = {
            (str(r["endpoint_id"]), str(r["event_id"])): int(r["n"])
            for r in await ctx.pool.fetch(DELIVERED_ROWS)
        }
        rows = {r["id"]: r for r in await ctx.pool.fetch(DELIVERIES, GLOBAL_FAMILY)}
        done: list[tuple[str, str]] = []
        for row in rows.values():
            if row["state"] == "done":
                data = row["input"]
                data = data if isinstance(data, dict) else orjson.loads(data)
                done.append((str(data["endpoint_id"]), str(data["event_id"])))
        invalid = 0
        for received in self.partner.requests:
            try:
                verify_standard(
                    self.secrets.get(received.path, ""),
                    received.headers,
                    received.body,
                    TOLERANCE_S,
                )
            except WebhookSignatureInvalidError:
                invalid += 1
        return {
            "webhook_acked": len(self.acked),
            "webhook_enqueue_errors": self.errors,
            "webhook_settled": settled,
            "webhook_received": sum(receipts.values()),
            "webhook_lost": sum(1 for job_id in self.acked if job_id not in rows),
            "webhook_dead": sum(1 for r in rows.values() if r["state"] in ("failed", "dead")),
            "webhook_deliveries_lost": sum(1 for pair in done if receipts[pair] == 0),
            "webhook_ledger_double_counted": sum(
                max(0, n - receipts[pair]) for pair, n in ledger.items()
            ),
            "webhook_ledger_missing": sum(1 for pair in done if pair not in ledger),
            "webhook_redelivered": sum(n - 1 for n in receipts.values() if n > 1),
            "webhook_signatures_invalid": invalid,
        }
