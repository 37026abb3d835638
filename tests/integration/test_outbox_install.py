"""``install_outbox``: one call makes an enqueue inside ``transaction(conn)`` stage on ``conn``
and publishes what commits; ``stop()`` undoes it."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.outbox import Pool, billing_jobs
from ujobs.context import transaction
from ujobs.errors import DriverUnavailableError, OutboxNoTxError
from ujobs.jobs.enqueue_target import job_driver, jobs_facade
from ujobs.jobs.job import JobHandle
from ujobs.outbox import install_outbox
from ujobs.outbox.staging_facade import OutboxJobsFacade
from ujobs.wake.announce import AnnouncingDriver


async def _job_ids(pool: Pool) -> list[str]:
    return [str(r["id"]) for r in await pool.fetch("select id from x_jobs order by id")]


async def _stage_then_roll_back(pool: Pool, handle: JobHandle[Any]) -> None:
    async with pool.acquire() as conn, transaction(conn):
        await handle.enqueue({"order": "gone"})
        raise RuntimeError("rolled back")


async def test_a_committed_enqueue_is_published_and_a_rolled_back_one_never_is(
    pg_dsn: str, pg_pool: Pool
) -> None:
    billing = billing_jobs()
    outbox = await install_outbox(pg_pool, dsn=pg_dsn)
    try:
        assert isinstance(job_driver(), AnnouncingDriver)
        assert isinstance(jobs_facade(), OutboxJobsFacade)
        assert outbox.relay is not None
        with pytest.raises(RuntimeError, match="rolled back"):
            await _stage_then_roll_back(pg_pool, billing.create_invoice)
        async with pg_pool.acquire() as conn, transaction(conn):
            queued = await billing.create_invoice.enqueue({"order": "o1"})
            assert await _job_ids(pg_pool) == []  # staged, not yet a job
        await outbox.relay.signals.wait("pass", lambda p: queued.id in p.published, timeout_s=10)
        assert await _job_ids(pg_pool) == [queued.id]
    finally:
        await outbox.stop()
    with pytest.raises(DriverUnavailableError):
        job_driver()
    assert not isinstance(jobs_facade(), OutboxJobsFacade)
    await outbox.stop()  # safe twice


async def test_without_a_relay_the_staged_row_waits_and_required_mode_refuses(
    pg_dsn: str, pg_pool: Pool
) -> None:
    billing = billing_jobs()
    outbox = await install_outbox(pg_pool, dsn=pg_dsn, relay=False, mode="required")
    try:
        assert outbox.relay is None
        assert outbox.wake is None
        with pytest.raises(OutboxNoTxError):
            await billing.create_invoice.enqueue({"order": "outside"})
        async with pg_pool.acquire() as conn, transaction(conn):
            await billing.create_invoice.enqueue({"order": "o1"})
        assert await pg_pool.fetchval("select count(*) from x_outbox") == 1
        assert await _job_ids(pg_pool) == []
    finally:
        await outbox.stop()
