"""Staging inside the caller's transaction, against real Postgres: the bug class the outbox
removes (a rolled-back transaction's job runs; a committed one's job is lost), the ids known
at enqueue time, ``mode='required'``, and the relay's wake delivered on COMMIT."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import pytest

from tests.support.outbox import (
    Pool,
    billing_jobs,
    job_rows,
    outbox_rows,
    relay_for,
    wire,
)
from ujobs.context import bind_transaction, transaction
from ujobs.drivers.base import ClaimOptions
from ujobs.errors import OutboxNoTxError
from ujobs.execution.attempt import execute_job
from ujobs.jobs.enqueue_target import jobs_facade


class Boom(Exception):
    pass


async def _stage_then_fail(conn: Any, handle: Any, order: str) -> None:
    """Stage inside a transaction whose business write then fails (so it rolls back)."""
    async with transaction(conn):
        await handle.enqueue({"order": order})
        raise Boom("the business write failed")


async def test_a_rolled_back_transaction_leaves_no_job(pg_pool: Pool) -> None:
    billing = billing_jobs()
    wired = wire(pg_pool)
    async with pg_pool.acquire() as conn:
        with pytest.raises(Boom):
            await _stage_then_fail(conn, billing.create_invoice, "o-1")
    assert await outbox_rows(pg_pool) == []
    result = await relay_for(wired).run_once()
    assert result.claimed == []
    assert await job_rows(pg_pool) == []


async def test_a_committed_transaction_runs_the_job_under_the_ids_enqueue_answered(
    pg_pool: Pool,
) -> None:
    billing = billing_jobs()
    wired = wire(pg_pool)
    async with pg_pool.acquire() as conn, transaction(conn):
        await conn.execute("create temp table invoices (id text primary key)")
        await conn.execute("insert into invoices values ('o-1')")
        queued = await billing.create_invoice.enqueue({"order": "o-1"})
        # Inside the transaction nothing is visible to anyone else yet.
        assert await outbox_rows(pg_pool) == []
    assert queued.deduped is False
    staged = await outbox_rows(pg_pool)
    assert [(r["id"], r["run_id"]) for r in staged] == [(queued.id, queued.run_id)]

    result = await relay_for(wired).run_once()
    assert result.published == [queued.id]
    jobs = await job_rows(pg_pool)
    assert [(j["id"], j["run_id"], j["state"]) for j in jobs] == [
        (queued.id, queued.run_id, "ready")
    ]
    (claimed,) = await wired.driver.claim(ClaimOptions(queues=["default"], limit=5, worker_id="w"))
    execution = await execute_job(
        claimed, driver=wired.driver, handle=billing.create_invoice, context=None
    )
    assert execution.outcome == "completed"
    assert [j["state"] for j in await job_rows(pg_pool)] == ["done"]
    assert billing.ran == [("create_invoice", "o-1")]
    assert (await outbox_rows(pg_pool))[0]["published_at_ms"] is not None


async def test_a_run_id_the_caller_names_is_the_run_id_staged(pg_pool: Pool) -> None:
    billing = billing_jobs()
    wired = wire(pg_pool)
    async with pg_pool.acquire() as conn, transaction(conn):
        queued = await billing.create_invoice.enqueue({"order": "o-2"}, run_id="run-chosen")
    assert queued.run_id == "run-chosen"
    await relay_for(wired).run_once()
    assert [j["run_id"] for j in await job_rows(pg_pool)] == ["run-chosen"]


async def test_enqueue_many_stages_in_one_statement_in_request_order(pg_pool: Pool) -> None:
    billing = billing_jobs()
    wired = wire(pg_pool)
    # A generator, as a list would be: staged whole, in order, inside the transaction.
    requests = (billing.create_invoice.request({"order": f"o-{n}"}) for n in range(5))
    async with pg_pool.acquire() as conn, transaction(conn):
        answers = await jobs_facade().enqueue_many(requests)
    staged = await outbox_rows(pg_pool)
    assert len(staged) == 5
    assert [a.id for a in answers] == [r["id"] for r in staged]
    await relay_for(wired).run_once()
    jobs = await job_rows(pg_pool)
    assert [(j["id"], j["run_id"]) for j in jobs] == [(a.id, a.run_id) for a in answers]


async def test_outside_a_transaction_optional_mode_publishes_straight_to_the_driver(
    pg_pool: Pool,
) -> None:
    billing = billing_jobs()
    wire(pg_pool)
    queued = await billing.create_invoice.enqueue({"order": "o-3"})
    assert await outbox_rows(pg_pool) == []
    assert [j["id"] for j in await job_rows(pg_pool)] == [queued.id]


async def test_required_mode_refuses_an_enqueue_outside_a_transaction(pg_pool: Pool) -> None:
    billing = billing_jobs()
    wire(pg_pool, mode="required")
    with pytest.raises(OutboxNoTxError) as refused:
        await billing.create_invoice.enqueue({"order": "o-4"})
    assert refused.value.code == "X_OUTBOX_NO_TX"
    with pytest.raises(OutboxNoTxError):
        await jobs_facade().enqueue_many([billing.create_invoice.request({"order": "o-5"})])
    with pytest.raises(OutboxNoTxError):
        await jobs_facade().enqueue_many(
            billing.create_invoice.request({"order": order}) for order in ("o-6", "o-7")
        )
    assert await jobs_facade().enqueue_many([]) == []  # nothing to refuse
    assert await job_rows(pg_pool) == []
    assert await outbox_rows(pg_pool) == []
    # ... and stages inside one.
    async with pg_pool.acquire() as conn, transaction(conn):
        await billing.create_invoice.enqueue({"order": "o-4"})
    assert len(await outbox_rows(pg_pool)) == 1


async def test_bind_transaction_joins_a_transaction_the_caller_opened(pg_pool: Pool) -> None:
    billing = billing_jobs()
    wire(pg_pool)
    async with pg_pool.acquire() as conn:
        tx = conn.transaction()
        await tx.start()
        with bind_transaction(conn):
            await billing.create_invoice.enqueue({"order": "o-6"})
        await tx.rollback()
    assert await outbox_rows(pg_pool) == []


async def test_a_staged_key_a_live_job_holds_dedupes_at_publish_and_its_ids_name_no_row(
    pg_pool: Pool,
) -> None:
    """The documented case: ``deduped`` is the publish's answer, not the stage's."""
    billing = billing_jobs()
    wired = wire(pg_pool)
    live = await billing.create_invoice.enqueue({"order": "o-7"})  # direct: a live job
    async with pg_pool.acquire() as conn, transaction(conn):
        staged = await billing.create_invoice.enqueue({"order": "o-7"})
    assert staged.deduped is False
    result = await relay_for(wired).run_once()
    assert result.published == [staged.id]
    assert result.deduped == [staged.id]
    assert [j["id"] for j in await job_rows(pg_pool)] == [live.id]


# -- the wake -------------------------------------------------------------------------------


async def _listen(dsn: str) -> tuple[asyncpg.Connection[Any], asyncio.Queue[str]]:
    heard: asyncio.Queue[str] = asyncio.Queue()
    conn = await asyncpg.connect(dsn)

    def on_notify(_c: object, _pid: int, _channel: str, payload: object) -> None:
        heard.put_nowait(str(payload))

    await conn.add_listener("x_outbox_wake", on_notify)
    return conn, heard


async def _next_heard(pool: Pool, heard: asyncio.Queue[str]) -> str:
    """What the channel carried next, with a sentinel sent after it: notifications arrive in
    commit order, so a wake that was NOT sent shows up as the sentinel."""
    await pool.execute("select pg_notify('x_outbox_wake', 'sentinel')")
    first = await asyncio.wait_for(heard.get(), 10)
    if first != "sentinel":
        assert await asyncio.wait_for(heard.get(), 10) == "sentinel"
    return first


async def test_the_stage_wakes_the_relay_on_commit_only_and_not_while_a_row_waits(
    pg_dsn: str, pg_pool: Pool
) -> None:
    billing = billing_jobs()
    wired = wire(pg_pool)
    listener, heard = await _listen(pg_dsn)
    try:
        async with pg_pool.acquire() as conn:
            # Rolled back: never announced.
            with pytest.raises(Boom):
                await _stage_then_fail(conn, billing.create_invoice, "a")
            assert await _next_heard(pg_pool, heard) == "sentinel"
            # Committed, nothing waiting: announced once, on COMMIT, for two rows staged.
            async with transaction(conn):
                await billing.create_invoice.enqueue({"order": "b"})
                await billing.charge_card.enqueue({"order": "b"})
                await pg_pool.execute("select pg_notify('x_outbox_wake', 'before-commit')")
                assert await asyncio.wait_for(heard.get(), 10) == "before-commit"
            assert await _next_heard(pg_pool, heard) == ""
            # A committed row is still waiting unclaimed: silent.
            async with transaction(conn):
                await billing.create_invoice.enqueue({"order": "c"})
            assert await _next_heard(pg_pool, heard) == "sentinel"
            # The relay took everything: the next stage announces again.
            await relay_for(wired).run_once()
            async with transaction(conn):
                await billing.create_invoice.enqueue({"order": "d"})
            assert await _next_heard(pg_pool, heard) == ""
    finally:
        await listener.close()


async def test_a_committed_transaction_runs_on_the_real_worker_through_the_relay(
    pg_dsn: str, pg_pool: Pool
) -> None:
    """The three steps and a worker, as a deployment runs them: nothing but the wakes in
    between (the relay hears the COMMIT, its publish wakes this process's worker)."""
    from prometheus_client import CollectorRegistry

    from ujobs.jobs.registry import Registry
    from ujobs.lifecycle import Lifecycle
    from ujobs.metrics import JobMetrics
    from ujobs.outbox import OUTBOX_WAKE_CHANNEL
    from ujobs.wake.listener import postgres_wake
    from ujobs.worker import job_worker

    billing = billing_jobs()
    wired = wire(pg_pool)
    registry = Registry()
    registry.register_job(billing.create_invoice)
    registry.register_job(billing.charge_card)
    hour = 3_600_000
    worker = job_worker(
        driver=wired.driver,
        context=None,
        registry=registry,
        queues=["default"],
        poll_interval_ms=hour,
        idle_poll_max_ms=hour,
        metrics=JobMetrics(CollectorRegistry()),
        lifecycle=Lifecycle(),
        close_driver=False,
    )
    wake = postgres_wake(pg_dsn, pg_pool, channels=(OUTBOX_WAKE_CHANNEL,))
    relay = relay_for(wired, interval_ms=hour, wake=wake)
    try:
        await wake.start()
        await worker.start()
        await relay.start()
        await relay.signals.wait("pass")
        async with pg_pool.acquire() as conn, transaction(conn):
            await billing.create_invoice.enqueue({"order": "o-9"})
            await billing.charge_card.enqueue({"order": "o-9"})
        async with asyncio.timeout(10):
            while len(billing.ran) < 2:
                await asyncio.sleep(0.01)
    finally:
        await relay.stop()
        await worker.stop()
        await wake.stop()
    # Published in staging order; a worker with free slots may start the two side by side.
    assert sorted(billing.ran) == [("charge_card", "o-9"), ("create_invoice", "o-9")]
    assert [j["name"] for j in await job_rows(pg_pool)] == ["create_invoice", "charge_card"]
    assert [j["state"] for j in await job_rows(pg_pool)] == ["done", "done"]
