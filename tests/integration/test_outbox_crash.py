"""Crash safety with real processes: a relay SIGKILLed between a publish and its mark loses
nothing, and the republish meets the job the first publish made — also when that job has
already FINISHED. And ``ujobs relay`` as a service: publishes, drains on SIGTERM, exits 0."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.outbox import (
    Pool,
    Wired,
    billing_jobs,
    job_rows,
    outbox_rows,
    relay_for,
    wire,
)
from ujobs.clock import SYSTEM_CLOCK, FrozenClock
from ujobs.context import transaction
from ujobs.drivers.base import ClaimOptions
from ujobs.execution.attempt import execute_job
from ujobs.jobs.job import JobHandle

ROOT = Path(__file__).resolve().parents[2]
LEASE = 30_000

pytestmark = pytest.mark.slow


async def _spawn(*args: str, env: dict[str, str] | None = None) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        *args,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def _line_starting(proc: asyncio.subprocess.Process, prefix: str) -> str:
    assert proc.stdout is not None
    async with asyncio.timeout(30):
        while True:
            raw = await proc.stdout.readline()
            if not raw:
                stderr = await proc.stderr.read() if proc.stderr else b""
                raise AssertionError(f"the child ended before {prefix!r}: {stderr.decode()}")
            line = raw.decode().strip()
            if line.startswith(prefix):
                return line


async def _run_every_due_job(wired: Wired, handles: dict[str, JobHandle[Any]]) -> int:
    ran = 0
    while True:
        claimed = await wired.driver.claim(
            ClaimOptions(queues=["default"], limit=10, worker_id="w")
        )
        if not claimed:
            return ran
        for job in claimed:
            await execute_job(job, driver=wired.driver, handle=handles[job.name], context=None)
            ran += 1


async def test_a_relay_killed_mid_batch_loses_nothing_and_republishes_no_second_job(
    pg_dsn: str, pg_pool: Pool
) -> None:
    billing = billing_jobs()
    handles = {"create_invoice": billing.create_invoice, "charge_card": billing.charge_card}
    wired = wire(pg_pool)
    for order in ("o1", "o2", "o3"):
        async with pg_pool.acquire() as conn, transaction(conn):
            await billing.create_invoice.enqueue({"order": order})
            await billing.charge_card.enqueue({"order": order})
    staged = [r["id"] for r in await outbox_rows(pg_pool)]

    child = await _spawn("-m", "tests.integration.outbox_relay_child", pg_dsn, "3")
    try:
        stalled = await _line_starting(child, "STALLED ")
    finally:
        child.send_signal(signal.SIGKILL)
        await child.wait()
    assert child.returncode == -signal.SIGKILL
    assert stalled == f"STALLED {staged[2]}"

    # Three jobs made; the third was published but never marked; the rest are still held.
    assert [j["id"] for j in await job_rows(pg_pool)] == staged[:3]
    rows = await outbox_rows(pg_pool)
    assert [r["published_at_ms"] is not None for r in rows] == [True, True] + [False] * 4
    assert {r["claimed_by"] for r in rows[2:]} == {"child:1"}
    # Inside the dead relay's lease nobody may take them.
    assert (await relay_for(wired).run_once()).claimed == []

    # Every job the dead relay made runs to the end — including the unmarked third one.
    assert await _run_every_due_job(wired, handles) == 3
    assert [j["state"] for j in await job_rows(pg_pool)] == ["done"] * 3

    # Past the lease another relay republishes the third (it meets the FINISHED job: no second
    # row, no second run) and publishes the rest, in order.
    later = relay_for(wired, clock=FrozenClock(SYSTEM_CLOCK.now_ms() + LEASE + 1_000))
    result = await later.run_once()
    assert result.published == staged[2:]
    assert result.deduped == [staged[2]]
    jobs = await job_rows(pg_pool)
    assert [j["id"] for j in jobs] == staged
    assert await _run_every_due_job(wired, handles) == 3
    assert billing.ran == [
        (name, order) for order in ("o1", "o2", "o3") for name in ("create_invoice", "charge_card")
    ]
    assert await wired.store.pending() == 0


async def test_ujobs_relay_publishes_and_drains_on_sigterm(pg_dsn: str, pg_pool: Pool) -> None:
    billing = billing_jobs()
    wire(pg_pool)
    env = {"DATABASE_URL": pg_dsn, "UJOBS_METRICS_PORT": "0"}
    service = await _spawn("-m", "ujobs.services.cli", "relay", env=env)
    try:
        await _line_starting(service, "ujobs relay: publishing")
        async with pg_pool.acquire() as conn, transaction(conn):
            queued = await billing.create_invoice.enqueue({"order": "o1"})
        async with asyncio.timeout(30):
            while not await job_rows(pg_pool):
                await asyncio.sleep(0.02)
        assert [j["id"] for j in await job_rows(pg_pool)] == [queued.id]
        service.send_signal(signal.SIGTERM)
        async with asyncio.timeout(30):
            code = await service.wait()
    finally:
        if service.returncode is None:
            service.kill()
            await service.wait()
    assert code == 0
    assert service.stderr is not None
    logged = (await service.stderr.read()).decode()
    assert "jobs.outbox.relay-stopped" in logged
