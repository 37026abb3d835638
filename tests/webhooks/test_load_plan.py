"""What the deliverer's batched read of endpoints and events reads, from its own generic plan,
prepared on empty webhook tables as a deliverer started on a fresh install prepares it: one
primary-key probe per asked pair, never a scan of a whole table. A server without autovacuum
never re-plans, so a sequential scan planned on an empty ``x_webhook_events`` would be read for
every delivery as the events pile up."""

from __future__ import annotations

from typing import Any

import asyncpg

from tests.support.plans import explain_prepared, plan_nodes
from ujobs.drivers.postgres.sql import query

WEBHOOK_TABLES = ("x_webhook_endpoints", "x_webhook_events")


async def test_the_batched_read_probes_each_pair_by_primary_key_on_empty_tables(
    pg_pool: asyncpg.Pool[Any],
) -> None:
    await pg_pool.execute(
        "truncate x_webhook_deliveries, x_webhook_subscriptions, x_webhook_endpoints,"
        " x_webhook_events cascade"
    )
    plan, events = await explain_prepared(
        pg_pool,
        query("webhooks_delivery_load"),
        "(array['ep_1', 'ep_2'], array['evt_1', 'evt_2'], 0)",
        "force_generic_plan",
        count="select count(*) from x_webhook_events",
    )
    assert events == 0
    reads = [
        (n["Node Type"], n.get("Relation Name"))
        for n in plan_nodes(plan)
        if n.get("Relation Name") in WEBHOOK_TABLES
    ]
    assert sorted(reads) == [
        ("Index Scan", "x_webhook_endpoints"),
        ("Index Scan", "x_webhook_events"),
    ]
