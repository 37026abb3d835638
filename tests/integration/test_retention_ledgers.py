"""The purge targets of the other families' ledgers: webhook deliveries, webhook events and the
NATS edge's settlements. Rows past their window go, measured on the caller's clock; what is not
yet delivered or published never does; a pass is bounded; ``x.purge`` carries all three."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson
import pytest

from ujobs.errors import ConfigInvalidError
from ujobs.retention import (
    LedgerPurgeTarget,
    settlements_purge_target,
    webhook_deliveries_purge_target,
    webhook_events_purge_target,
)
from ujobs.retention.builtin import RetentionWindows, builtin_targets
from ujobs.retention.ledger_targets import BUILTIN_WEBHOOK_FAMILIES
from ujobs.webhooks.builtin import GLOBAL_FAMILY, ORG_FAMILY

if TYPE_CHECKING:
    import asyncpg

    Pool = asyncpg.Pool[Any]

T0 = 1_700_000_000_000
DAY = 86_400_000


async def job_row(pool: Pool, job_id: str, state: str, *, name: str = "j", **extra: Any) -> None:
    await pool.execute(
        "insert into x_jobs (id, run_id, name, queue, state, input, tenant_id, idempotency_key,"
        " max_attempts, run_at, created_at, updated_at) values ($1, $1, $2, 'webhooks', $3,"
        " $4::jsonb, $5, $1, 1, x_ts($6), x_ts($6), x_ts($6))",
        job_id,
        name,
        state,
        orjson.dumps(extra.get("input", {})).decode(),
        extra.get("tenant"),
        T0,
    )


async def delivery(pool: Pool, job_id: str, event_id: str, at_ms: int, attempt: int = 1) -> None:
    await pool.execute(
        "insert into x_webhook_deliveries (endpoint_id, event_id, job_id, attempt, outcome,"
        " latency_ms, at) values ('ep', $1, $2, $3, 'failed', 1, x_ts($4))",
        event_id,
        job_id,
        attempt,
        at_ms,
    )


async def event(pool: Pool, event_id: str, at_ms: int, tenant: str | None = "org_1") -> None:
    await pool.execute(
        "insert into x_webhook_events (id, tenant_id, topic, body, created_at)"
        " values ($1, $2, 'orders.paid', '{}'::bytea, x_ts($3))",
        event_id,
        tenant,
        at_ms,
    )


async def column(pool: Pool, statement: str) -> list[Any]:
    return [row[0] for row in await pool.fetch(statement)]


async def test_deliveries_go_after_the_window_but_never_those_of_a_live_delivery(
    pg_pool: Pool,
) -> None:
    await job_row(pg_pool, "finished", "done")
    await job_row(pg_pool, "retrying", "delayed")
    await delivery(pg_pool, "finished", "evt_1", T0)
    await delivery(pg_pool, "finished", "evt_1", T0 + 5 * DAY, attempt=2)
    await delivery(pg_pool, "retrying", "evt_2", T0)
    await delivery(pg_pool, "gone", "evt_3", T0)  # its job row was purged already

    target = webhook_deliveries_purge_target(executor=pg_pool)  # 30 days
    assert target.name == "x_webhook_deliveries"
    assert await target.count_expired(T0 + 30 * DAY) == 0  # exactly 30 days: kept
    assert await target.purge_expired(T0 + 30 * DAY) == 0
    assert await target.count_expired(T0 + 30 * DAY + 1) == 2
    assert await target.purge_expired(T0 + 30 * DAY + 1) == 2
    left = "select job_id || ':' || attempt from x_webhook_deliveries order by seq"
    assert await column(pg_pool, left) == ["finished:2", "retrying:1"]
    assert await target.purge_expired(T0 + 365 * DAY) == 1
    assert await column(pg_pool, left) == ["retrying:1"]  # still live: its history stays


async def test_an_event_goes_once_no_ledger_row_and_no_delivery_job_names_it(
    pg_pool: Pool,
) -> None:
    for event_id in ("free", "free-2", "in-ledger", "queued", "young"):
        await event(pg_pool, event_id, T0 + (20 * DAY if event_id == "young" else 0))
    await event(pg_pool, "other-tenant", T0, tenant="org_2")
    await delivery(pg_pool, "j1", "in-ledger", T0 + 10 * DAY)
    await job_row(
        pg_pool,
        "d1",
        "ready",
        name=ORG_FAMILY,
        tenant="org_1",
        input={"endpoint_id": "ep", "event_id": "queued", "org_id": "org_1"},
    )
    await event(pg_pool, "queued-g", T0, tenant=None)
    await job_row(
        pg_pool,
        "d2",
        "running",
        name=GLOBAL_FAMILY,
        input={"endpoint_id": "ep", "event_id": "queued-g"},
    )
    # A delivery job of ANOTHER tenant does not hold an event.
    await job_row(
        pg_pool,
        "d3",
        "ready",
        name=ORG_FAMILY,
        tenant="org_1",
        input={"endpoint_id": "ep", "event_id": "other-tenant", "org_id": "org_1"},
    )

    events = webhook_events_purge_target(executor=pg_pool)
    deliveries = webhook_deliveries_purge_target(executor=pg_pool)
    now = T0 + 31 * DAY
    assert events.name == "x_webhook_events"
    assert await events.count_expired(now) == 3
    assert await events.purge_expired(now) == 3
    ids = "select id from x_webhook_events order by id"
    assert await column(pg_pool, ids) == ["in-ledger", "queued", "queued-g", "young"]

    # The ledger row goes at its own 30 days; then nothing names the event.
    later = T0 + 41 * DAY
    assert await deliveries.purge_expired(later) == 1
    assert await events.purge_expired(later) == 1
    # A finished delivery still holds its event (an operator may retry it); the jobs target
    # deleting its row is what frees the event.
    await pg_pool.execute("update x_jobs set state = 'done' where id in ('d1', 'd2')")
    assert await events.purge_expired(later) == 0
    await pg_pool.execute("delete from x_jobs where id in ('d1', 'd2')")
    assert await events.purge_expired(later) == 2
    assert await column(pg_pool, ids) == ["young"]


async def test_an_event_outlives_its_ledger_rows_while_a_dead_delivery_names_it(
    pg_pool: Pool,
) -> None:
    """Deliveries and events go after 30 days, dead jobs after 90: a retry of the dead delivery
    reads its event, so the event stays while any job row of the families names it."""
    await event(pg_pool, "evt_dead", T0)
    await delivery(pg_pool, "dead-1", "evt_dead", T0)
    await job_row(
        pg_pool,
        "dead-1",
        "dead",
        name=ORG_FAMILY,
        tenant="org_1",
        input={"endpoint_id": "ep", "event_id": "evt_dead", "org_id": "org_1"},
    )
    events = webhook_events_purge_target(executor=pg_pool)
    deliveries = webhook_deliveries_purge_target(executor=pg_pool)
    now = T0 + 60 * DAY
    assert await deliveries.purge_expired(now) == 1
    assert await events.count_expired(now) == 0
    assert await events.purge_expired(now) == 0
    assert await column(pg_pool, "select id from x_webhook_events") == ["evt_dead"]


async def test_published_settlements_go_after_the_window_and_pending_ones_never(
    pg_pool: Pool,
) -> None:
    async def settlement(job_id: str, published_ms: int | None) -> None:
        await pg_pool.execute(
            "insert into x_settlements (job_id, run_id, name, outcome, attempt, settled_at,"
            " published_at) values ($1, $1, 'j', 'completed', 1, x_ts($2), x_ts($3))",
            job_id,
            T0 - DAY,
            published_ms,
        )

    await settlement("published-at-T0", T0)
    await settlement("published-later", T0 + DAY // 2)
    await settlement("pending", None)
    target = settlements_purge_target(executor=pg_pool)  # a day
    assert target.name == "x_settlements"
    assert await target.purge_expired(T0 + DAY) == 0
    assert await target.count_expired(T0 + DAY + 1) == 1
    assert await target.purge_expired(T0 + DAY + 1) == 1
    left = "select job_id from x_settlements order by seq"
    assert await column(pg_pool, left) == ["published-later", "pending"]
    assert await target.purge_expired(T0 + 365 * DAY) == 1
    assert await column(pg_pool, left) == ["pending"]


async def test_a_pass_deletes_in_batches_up_to_its_bound(pg_pool: Pool) -> None:
    for n in range(7):
        await delivery(pg_pool, f"j{n}", "evt", T0)
    bounded = webhook_deliveries_purge_target(executor=pg_pool, batch_size=2, max_batches=3)
    assert await bounded.purge_expired(T0 + 31 * DAY) == 6
    assert await bounded.purge_expired(T0 + 31 * DAY) == 1
    assert await pg_pool.fetchval("select count(*) from x_webhook_deliveries") == 0


def test_the_options_are_checked() -> None:
    with pytest.raises(ConfigInvalidError) as raised:
        settlements_purge_target(executor=None, retention_ms=0)  # type: ignore[arg-type]
    assert raised.value.meta["option"] == "retention_ms"


def test_the_builtin_sweep_carries_every_ledger_with_its_own_window() -> None:
    assert BUILTIN_WEBHOOK_FAMILIES == (ORG_FAMILY, GLOBAL_FAMILY)
    windows = RetentionWindows(webhooks_ms=5 * DAY, settlements_ms=2 * DAY)
    targets = builtin_targets(object(), windows)  # type: ignore[arg-type]
    names = [target.name for target in targets]
    assert names == [
        "x_jobs",
        "x_outbox",
        "x_job_events",
        "x_webhook_deliveries",
        "x_webhook_events",
        "x_settlements",
    ]
    windows_of = {t.name: t.retention_ms for t in targets if isinstance(t, LedgerPurgeTarget)}
    assert windows_of == {
        "x_outbox": 7 * DAY,  # the outbox is a ledger too, on its own window
        "x_webhook_deliveries": 5 * DAY,
        "x_webhook_events": 5 * DAY,
        "x_settlements": 2 * DAY,
    }
