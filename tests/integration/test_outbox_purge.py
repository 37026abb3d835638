"""``outbox_purge_target``: published rows past the retention go, measured on the caller's
clock; an unpublished row is a job not yet handed over and is never deleted."""

from __future__ import annotations

from tests.support.outbox import Pool, Wired, billing_jobs, outbox_rows, relay_for, wire
from ujobs.clock import FrozenClock
from ujobs.context import transaction
from ujobs.jobs.enqueue_target import set_jobs_facade
from ujobs.outbox import outbox_jobs_facade, outbox_purge_target, postgres_outbox_store

T0 = 1_700_000_000_000
DAY = 86_400_000


async def test_published_rows_go_after_the_retention_and_unpublished_rows_never(
    pg_pool: Pool,
) -> None:
    billing = billing_jobs()
    wired = wire(pg_pool)
    old_store = postgres_outbox_store(executor=pg_pool, clock=FrozenClock(T0 - 30 * DAY))
    set_jobs_facade(outbox_jobs_facade(store=old_store, driver=wired.driver))

    async def stage(order: str) -> str:
        async with pg_pool.acquire() as conn, transaction(conn):
            return (await billing.create_invoice.enqueue({"order": order})).id

    first = await stage("published-at-T0")
    await relay_for(wired, clock=FrozenClock(T0)).run_once()
    second = await stage("published-6-days-later")
    await relay_for(wired, clock=FrozenClock(T0 + 6 * DAY)).run_once()
    # Staged a month ago and never published: a relay still has to hand it over.
    never = await stage("never-published")

    target = outbox_purge_target(executor=pg_pool)  # 7 days
    assert target.name == "x_outbox"
    assert await target.purge_expired(T0 + 7 * DAY) == 0  # exactly 7 days: kept
    assert await target.purge_expired(T0 + 7 * DAY + 1) == 1
    assert [r["id"] for r in await outbox_rows(pg_pool)] == [second, never]
    assert await target.purge_expired(T0 + 365 * DAY) == 1
    assert [r["id"] for r in await outbox_rows(pg_pool)] == [never]
    assert first not in {r["id"] for r in await outbox_rows(pg_pool)}


async def test_a_pass_deletes_in_batches_up_to_its_bound(pg_pool: Pool) -> None:
    billing = billing_jobs()
    wired = wire(pg_pool)
    async with pg_pool.acquire() as conn, transaction(conn):
        for n in range(7):
            await billing.create_invoice.enqueue({"order": f"o{n}"})
    await relay_for(Wired(wired.driver, wired.store), clock=FrozenClock(T0)).run_once()
    bounded = outbox_purge_target(executor=pg_pool, batch_size=2, max_batches=3)
    assert await bounded.purge_expired(T0 + 8 * DAY) == 6
    assert await bounded.purge_expired(T0 + 8 * DAY) == 1
    assert await outbox_rows(pg_pool) == []
