"""§ Leases: every renewal, every report, and the silence for a run that finished or is being
settled — on the memory driver and a frozen clock, one heartbeat tick at a time."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from tests.support.worker import (
    T0,
    ControlledDriver,
    Gate,
    declare,
    enqueue,
    make_worker,
    records,
    row,
    sample,
    settled,
)
from ujobs.clock import FrozenClock
from ujobs.drivers.base import ClaimOptions
from ujobs.errors import error_code_of
from ujobs.execution.run import Run, Settled
from ujobs.worker.concurrency import job_cap_key
from ujobs.worker.job_worker import JobWorker

WINDOW = 3_000
INTERVAL = 1_000


class Watcher:
    """A body that runs until its signal is aborted, and remembers why."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.reasons: list[str | None] = []

    async def __call__(self, run: Run[Any]) -> None:
        self.entered.set()
        try:
            await run.signal.wait()
        finally:  # a halt (lost lease, lost slot) also cancels the body: read the signal
            reason = run.signal.reason
            self.reasons.append(error_code_of(reason) if reason is not None else None)


def _setup(body: Any, **kw: Any) -> tuple[ControlledDriver, FrozenClock, Any]:
    clock = FrozenClock(T0)
    driver = ControlledDriver(clock)
    return driver, clock, declare(body, **kw)


def _worker(driver: ControlledDriver, handle: Any) -> JobWorker:
    return make_worker(driver, [handle], visibility_timeout_ms=WINDOW)


def _lost(worker: JobWorker, queue: str = "default") -> float:
    return sample(worker.metrics, "job_leases_lost_total", queue=queue)


async def test_each_held_run_renews_its_lease_every_interval(
    caplog: pytest.LogCaptureFixture,
) -> None:
    gate = Gate()
    driver, clock, handle = _setup(gate)
    job_id = await enqueue(driver, handle, 1)
    worker = _worker(driver, handle)
    assert worker.options.heartbeat_interval_ms == INTERVAL
    await worker.run_once()
    await gate.entered.wait()
    clock.advance(INTERVAL - 1)
    await worker.heartbeat_once()
    assert driver.heartbeats == 0
    for beat in range(1, 6):
        clock.advance(INTERVAL if beat > 1 else 1)
        await worker.heartbeat_once()
        assert driver.heartbeats == beat
        assert (await row(driver, job_id)).lease_expires_at_ms == clock.now_ms() + WINDOW
    gate.open.set()
    await worker.join()
    assert (await row(driver, job_id)).state == "done"
    assert records(caplog, "jobs.lease.lost") == []
    assert records(caplog, "jobs.heartbeat.failed") == []


async def test_failures_warn_then_a_whole_window_without_one_landing_loses_the_lease(
    caplog: pytest.LogCaptureFixture,
) -> None:
    body = Watcher()
    driver, clock, handle = _setup(body)
    await enqueue(driver, handle, 1)
    worker = _worker(driver, handle)
    await worker.run_once()
    await body.entered.wait()
    driver.heartbeat_error = ConnectionError("the database went away")
    for _ in range(2):
        clock.advance(INTERVAL)
        await worker.heartbeat_once()
    assert len(records(caplog, "jobs.heartbeat.failed")) == 2
    assert records(caplog, "jobs.lease.lost") == []
    assert _lost(worker) == 0
    clock.advance(INTERVAL)  # a whole window since the claim, the last renewal that landed
    await worker.heartbeat_once()
    (lost,) = records(caplog, "jobs.lease.lost")
    assert (lost.levelname, lost.__dict__["reason"]) == ("ERROR", "window")
    assert _lost(worker) == 1
    (execution,) = await settled(worker, 1)
    assert body.reasons == ["X_JOB_LEASE_LOST"]
    assert execution.code == "X_JOB_LEASE_LOST"


async def test_a_hanging_renewal_is_caught_by_the_window(
    caplog: pytest.LogCaptureFixture,
) -> None:
    body = Watcher()
    driver, clock, handle = _setup(body)
    await enqueue(driver, handle, 1)
    worker = _worker(driver, handle)
    await worker.run_once()
    await body.entered.wait()
    driver.heartbeat_gate = asyncio.Event()
    clock.advance(INTERVAL)
    on_the_wire = asyncio.ensure_future(worker.heartbeat_once())
    await driver.heartbeat_entered.wait()
    clock.advance(WINDOW - INTERVAL)
    await worker.heartbeat_once()  # the renewal still hangs: nothing new is sent
    assert driver.heartbeats == 1
    (lost,) = records(caplog, "jobs.lease.lost")
    assert lost.__dict__["reason"] == "window"
    driver.heartbeat_gate.set()
    await on_the_wire
    await worker.join()
    assert len(records(caplog, "jobs.lease.lost")) == 1  # the late answer is not read
    assert _lost(worker) == 1


async def test_a_row_another_claim_holds_is_lost_not_ours(
    caplog: pytest.LogCaptureFixture,
) -> None:
    body = Watcher()
    driver, clock, handle = _setup(body)
    job_id = await enqueue(driver, handle, 1)
    worker = _worker(driver, handle)
    await worker.run_once()
    await body.entered.wait()
    driver.state.rows[job_id].lease_expires_at_ms = clock.now_ms()  # backdated: it lapsed
    taken = await driver.claim(ClaimOptions(queues=["default"], limit=1, worker_id="other"))
    assert [c.id for c in taken] == [job_id]
    clock.advance(INTERVAL)
    await worker.heartbeat_once()
    (lost,) = records(caplog, "jobs.lease.lost")
    assert (lost.levelname, lost.__dict__["reason"]) == ("ERROR", "not-ours")
    assert _lost(worker) == 1
    (execution,) = await settled(worker, 1)
    assert execution.settled is False  # the fence: the other claim owns the row now
    assert (await row(driver, job_id)).claimed_by == "other"


async def test_a_cancelled_row_is_reported_at_info_aborted_and_never_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="ujobs.worker")
    body = Watcher()
    driver, clock, handle = _setup(body)
    job_id = await enqueue(driver, handle, 1)
    worker = _worker(driver, handle)
    await worker.run_once()
    await body.entered.wait()
    introspect = driver.introspect
    assert introspect is not None
    await introspect.cancel(job_id, "runaway")
    clock.advance(INTERVAL)
    await worker.heartbeat_once()
    (cancelled,) = records(caplog, "jobs.lease.cancelled")
    assert cancelled.levelname == "INFO"
    assert records(caplog, "jobs.lease.lost") == []
    assert _lost(worker) == 0
    (execution,) = await settled(worker, 1)
    assert body.reasons == ["X_JOB_LEASE_LOST"]
    assert execution.jobs_total is None
    assert (await row(driver, job_id)).state == "cancelled"


async def test_nothing_is_reported_for_a_run_that_finished_under_a_renewal_on_the_wire(
    caplog: pytest.LogCaptureFixture,
) -> None:
    gate = Gate()
    driver, clock, handle = _setup(gate)
    job_id = await enqueue(driver, handle, 1)
    worker = _worker(driver, handle)
    await worker.run_once()
    await gate.entered.wait()
    driver.heartbeat_gate = asyncio.Event()
    clock.advance(INTERVAL)
    on_the_wire = asyncio.ensure_future(worker.heartbeat_once())
    await driver.heartbeat_entered.wait()
    gate.open.set()
    await worker.join()  # acked out of running while the renewal hangs
    assert (await row(driver, job_id)).state == "done"
    driver.heartbeat_gate.set()
    await on_the_wire  # it answers 'lost' (the row is done): not read
    assert records(caplog, "jobs.lease.lost") == []
    assert records(caplog, "jobs.heartbeat.failed") == []
    assert _lost(worker) == 0


async def test_nothing_is_renewed_or_reported_while_a_run_is_being_settled(
    caplog: pytest.LogCaptureFixture,
) -> None:
    hook_entered, hook_release = asyncio.Event(), asyncio.Event()

    async def hook(settled_run: Settled[Any]) -> None:
        hook_entered.set()
        await hook_release.wait()

    async def quick(run: Run[Any]) -> str:
        return "ok"

    driver, clock, handle = _setup(quick, on_settled=hook)
    await enqueue(driver, handle, 1)
    worker = _worker(driver, handle)
    await worker.run_once()
    await hook_entered.wait()  # the ack landed; on_settled runs; the run is still held
    assert len(worker.held) == 1
    assert worker.stats().in_flight == 0  # its pool slot was freed when the ack was sent
    clock.advance(WINDOW * 2)
    await worker.heartbeat_once()
    assert driver.heartbeats == 0
    assert records(caplog, "jobs.lease.lost") == []
    hook_release.set()
    (execution,) = await settled(worker, 1)
    assert execution.outcome == "completed"
    assert _lost(worker) == 0


async def test_the_same_timer_renews_the_fleet_slot_and_a_lost_slot_stops_the_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    body = Watcher()
    driver, clock, handle = _setup(body, concurrency=1)
    await enqueue(driver, handle, 1)
    worker = _worker(driver, handle)
    await worker.run_once()
    await body.entered.wait()
    leases = driver.leases
    assert leases is not None
    key = job_cap_key(handle.name)
    (holder,) = await leases.holders(key)
    clock.advance(INTERVAL)
    await worker.heartbeat_once()
    clock.advance(WINDOW - INTERVAL + 500)  # past the slot's first TTL: it was renewed
    assert await leases.holders(key) == [holder]
    await worker.heartbeat_once()
    await leases.release(key, holder)  # the slot is gone (lapsed, or taken)
    clock.advance(INTERVAL)
    await worker.heartbeat_once()
    (slot_lost,) = records(caplog, "jobs.worker.slot-lost")
    assert slot_lost.levelname == "ERROR"
    (execution,) = await settled(worker, 1)
    assert body.reasons == ["X_JOB_SLOT_LOST"]
    assert execution.code == "X_JOB_SLOT_LOST"
    assert records(caplog, "jobs.lease.lost") == []
