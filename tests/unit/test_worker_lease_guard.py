"""§ Leases, "past the attempt's abort, no NEW step starts": the lease window is checked before
the body, before each step and before each step's save, on the worker's clock — not only at
the heartbeat's next tick. The timer never ticks here (no ``heartbeat_once``), so only the
guard can see the lapse: a frozen clock moved past the window stands for a process frozen past
its lease whose body's timer fires before the heartbeat's."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.support.worker import (
    T0,
    ControlledDriver,
    declare,
    enqueue,
    make_worker,
    records,
    row,
    sample,
    settled,
)
from ujobs.clock import FrozenClock
from ujobs.execution.run import Run
from ujobs.signal import Signal
from ujobs.worker import JobWorker

WINDOW = 3_000


class TwoSteps:
    """Step ``a``, a pause the test ends (``resume``), then step ``b``, whose function the
    test may hold (``b_gate``); remembers what each step's function did."""

    def __init__(self) -> None:
        self.paused = asyncio.Event()
        self.resume = asyncio.Event()
        self.b_gate: asyncio.Event | None = None
        self.b_entered = asyncio.Event()
        self.effects: list[str] = []

    async def __call__(self, run: Run[Any]) -> str:
        await run.step.run("a", lambda _: self._effect("a"))
        self.paused.set()
        await self.resume.wait()
        return await run.step.run("b", self._b)

    def _effect(self, name: str) -> str:
        self.effects.append(name)
        return name

    async def _b(self, _signal: Signal) -> str:
        self.b_entered.set()
        if self.b_gate is not None:
            await self.b_gate.wait()
        return self._effect("b")


async def _setup() -> tuple[ControlledDriver, FrozenClock, TwoSteps, JobWorker, str]:
    clock = FrozenClock(T0)
    driver = ControlledDriver(clock)
    body = TwoSteps()
    handle = declare(body, retry={"attempts": 3})
    worker = make_worker(driver, [handle], visibility_timeout_ms=WINDOW)
    return driver, clock, body, worker, await enqueue(driver, handle, 1)


async def _step_names(driver: ControlledDriver, job_id: str) -> list[str]:
    found = await row(driver, job_id)
    return [s.name for s in await driver.load_steps(found.run_id, tenant_id=found.tenant_id)]


async def test_a_lapsed_window_stops_the_next_step_before_its_function_runs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    driver, clock, body, worker, job_id = await _setup()
    await worker.run_once()
    await body.paused.wait()
    clock.advance(WINDOW)  # a whole window since the claim; no renewal landed, no tick ran
    body.resume.set()
    (execution,) = await settled(worker, 1)
    assert body.effects == ["a"]  # b's side effect never ran
    assert await _step_names(driver, job_id) == ["a"]
    assert execution.code == "X_JOB_LEASE_LOST"
    (lost,) = records(caplog, "jobs.lease.lost")
    assert (lost.levelname, lost.__dict__["reason"]) == ("ERROR", "window")
    assert sample(worker.metrics, "job_leases_lost_total", queue="default") == 1
    await worker.heartbeat_once()  # the timer, when it ticks, reports nothing more
    assert len(records(caplog, "jobs.lease.lost")) == 1


async def test_a_window_that_lapses_while_a_step_runs_saves_nothing() -> None:
    driver, clock, body, worker, job_id = await _setup()
    body.b_gate = asyncio.Event()
    body.resume.set()
    await worker.run_once()
    await body.b_entered.wait()
    clock.advance(WINDOW)
    body.b_gate.set()
    (execution,) = await settled(worker, 1)
    assert execution.code == "X_JOB_LEASE_LOST"
    assert await _step_names(driver, job_id) == ["a"]  # b finished, but was never saved


async def test_under_a_drain_a_started_step_is_still_refused_once_the_lease_lapsed() -> None:
    driver, clock, body, worker, job_id = await _setup()
    body.b_gate = asyncio.Event()
    body.resume.set()
    await worker.run_once()
    await body.b_entered.wait()
    worker._accept()  # the drain: a started step may still be saved ...
    clock.advance(WINDOW)  # ... but not by a worker whose lease lapsed meanwhile
    body.b_gate.set()
    await settled(worker, 1)
    assert await _step_names(driver, job_id) == ["a"]


async def test_a_renewal_that_landed_keeps_the_steps_going() -> None:
    driver, clock, body, worker, job_id = await _setup()
    await worker.run_once()
    await body.paused.wait()
    clock.advance(WINDOW - 1_000)
    await worker.heartbeat_once()  # lands: the window now counts from here
    clock.advance(WINDOW - 1)
    body.resume.set()
    (execution,) = await settled(worker, 1)
    assert execution.outcome == "completed"
    assert body.effects == ["a", "b"]
    assert await _step_names(driver, job_id) == ["a", "b"]


async def test_a_row_held_past_its_lease_before_its_body_starts_never_runs_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    driver, clock, body, worker, job_id = await _setup()
    await worker.run_once()  # the run's task is created, not yet started
    clock.advance(WINDOW)
    (execution,) = await settled(worker, 1)
    assert body.effects == []
    assert execution.code == "X_JOB_LEASE_LOST"
    assert (await row(driver, job_id)).state == "ready"  # nothing took it: retried, counted
    assert len(records(caplog, "jobs.lease.lost")) == 1
