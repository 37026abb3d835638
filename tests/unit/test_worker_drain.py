"""The drain (§ Roles, § The deadline cancels): accept stops claiming, aborts every held run
with X_DRAINING and announces draining; close waits within the deadline, then abandons. A
manual stop() aborts nothing."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.support.worker import Gate, declare, enqueue, make_worker, records, row, settled
from ujobs.drivers.memory.driver import MemoryDriver, memory_driver
from ujobs.errors import JobDrainedError, error_code_of
from ujobs.execution.run import Run
from ujobs.lifecycle import Lifecycle
from ujobs.worker.job_worker import JobWorker
from ujobs.worker.stats import WorkerState


async def _draining_at(driver: MemoryDriver) -> int | None:
    introspect = driver.introspect
    assert introspect is not None
    for _ in range(100):
        rows = await introspect.workers()
        if rows and rows[0].draining_at_ms is not None:
            return rows[0].draining_at_ms
        await asyncio.sleep(0)
    return None


def _state(worker: JobWorker) -> WorkerState:
    """``worker.state`` read afresh: the drain moves it on, which a type checker that narrowed
    it on an earlier ``assert worker.state == ...`` cannot see."""
    return worker.state


async def _started(worker: JobWorker, entered: asyncio.Event) -> None:
    await worker.start()
    await asyncio.wait_for(entered.wait(), 10)


async def test_sigterm_interrupts_a_run_that_unwinds_and_hands_it_back_uncounted() -> None:
    driver = memory_driver()
    entered, saw, release = asyncio.Event(), asyncio.Event(), asyncio.Event()
    reasons: list[BaseException] = []

    async def body(run: Run[Any]) -> None:
        entered.set()
        reasons.append(await run.signal.wait())
        saw.set()
        await release.wait()
        run.signal.throw_if_aborted()

    handle = declare(body, retry={"attempts": 1})
    job_id = await enqueue(driver, handle, 1)
    lifecycle = Lifecycle(deadline_ms=5_000)
    lifecycle.last_signal = "SIGTERM"  # what handle_signals records
    worker = make_worker(driver, [handle], lifecycle=lifecycle)
    await _started(worker, entered)
    draining = asyncio.ensure_future(lifecycle.drain())
    await saw.wait()
    assert _state(worker) == "draining"
    assert await _draining_at(driver) is not None  # announced at once, before the wait
    release.set()
    await draining
    (reason,) = reasons
    assert isinstance(reason, JobDrainedError)
    assert reason.meta == {"worker": worker.id, "signal": "SIGTERM"}
    (execution,) = await settled(worker, 1)
    assert (execution.outcome, execution.jobs_total) == ("interrupted", None)
    r = await row(driver, job_id)
    assert (r.state, r.attempt) == ("ready", 0)  # attempts=1 survives the deploy
    assert _state(worker) == "stopped"
    introspect = driver.introspect
    assert introspect is not None
    assert await introspect.workers() == []


async def test_close_waits_for_a_run_that_finishes_through_the_drain() -> None:
    driver = memory_driver()
    gate = Gate()
    handle = declare(gate)
    job_id = await enqueue(driver, handle, 1)
    lifecycle = Lifecycle(deadline_ms=5_000)
    worker = make_worker(driver, [handle], lifecycle=lifecycle)
    await _started(worker, gate.entered)
    draining = asyncio.ensure_future(lifecycle.drain())
    await worker.signals.wait("draining")
    gate.open.set()  # the body ignores the signal and returns
    await draining
    (execution,) = await settled(worker, 1)
    assert execution.outcome == "completed"
    assert (await row(driver, job_id)).state == "done"


async def test_a_body_that_ignores_the_signal_is_abandoned_at_the_deadline(
    caplog: pytest.LogCaptureFixture,
) -> None:
    driver = memory_driver()
    entered = asyncio.Event()

    async def stubborn(run: Run[Any]) -> None:
        entered.set()
        await asyncio.sleep(3_600)

    handle = declare(stubborn)
    job_id = await enqueue(driver, handle, 1)
    lifecycle = Lifecycle(deadline_ms=100)
    worker = make_worker(driver, [handle], lifecycle=lifecycle)
    await _started(worker, entered)
    await lifecycle.drain()
    (abandoned,) = records(caplog, "jobs.worker.drain-abandoned")
    assert abandoned.levelname == "ERROR"
    assert abandoned.__dict__["job_ids"] == [job_id]
    assert worker.state == "stopped"
    assert worker.stats().in_flight == 0
    # Nothing settled it: the lease lapses and the queue delivers it again.
    assert (await row(driver, job_id)).state == "running"


async def test_a_manual_stop_aborts_nothing_and_waits_for_its_runs() -> None:
    driver = memory_driver()
    entered, release = asyncio.Event(), asyncio.Event()
    seen: list[bool] = []

    async def body(run: Run[Any]) -> None:
        entered.set()
        await release.wait()
        seen.append(run.signal.aborted)

    handle = declare(body)
    await enqueue(driver, handle, 1)
    worker = make_worker(driver, [handle])
    await _started(worker, entered)
    stopping = asyncio.ensure_future(worker.stop())
    assert await _draining_at(driver) is not None  # a worker that stops claiming says so
    assert not stopping.done()
    release.set()
    await stopping
    assert seen == [False]
    (execution,) = await settled(worker, 1)
    assert execution.outcome == "completed"
    await worker.stop()  # safe twice


async def test_start_and_stop_are_safe_twice_and_hooks_follow_drain_on_shutdown() -> None:
    driver = memory_driver()
    handle = declare(Gate())
    never_started = make_worker(driver, [handle])
    await never_started.stop()
    lifecycle = Lifecycle()
    worker = make_worker(driver, [handle], lifecycle=lifecycle)
    await worker.start()
    await worker.start()
    assert lifecycle.hook_count == 1
    await worker.stop()
    await worker.stop()
    assert lifecycle.hook_count == 0
    assert worker.state == "stopped"
    quiet = Lifecycle()
    manual = make_worker(driver, [handle], lifecycle=quiet, drain_on_shutdown=False)
    await manual.start()
    assert quiet.hook_count == 0
    await manual.stop()


async def test_under_a_drain_a_running_step_is_saved_and_a_new_one_refused() -> None:
    driver = memory_driver()
    in_step, release = asyncio.Event(), asyncio.Event()
    refused: list[str | None] = []

    async def body(run: Run[Any]) -> None:
        async def slow(signal: Any) -> str:
            in_step.set()
            await release.wait()
            return "sent"

        await run.step.run("post", slow)
        try:
            await run.step.run("after", lambda signal: "never")
        except JobDrainedError as exc:
            refused.append(error_code_of(exc))
            raise

    handle = declare(body)
    job_id = await enqueue(driver, handle, 1)
    lifecycle = Lifecycle(deadline_ms=5_000)
    worker = make_worker(driver, [handle], lifecycle=lifecycle)
    await _started(worker, in_step)
    draining = asyncio.ensure_future(lifecycle.drain())
    await worker.signals.wait("draining")
    release.set()  # the POST already on the wire finishes
    await draining
    assert refused == ["X_DRAINING"]
    r = await row(driver, job_id)
    steps = await driver.load_steps(r.run_id, tenant_id=r.tenant_id)
    assert [s.name for s in steps] == ["post"]
    assert (r.state, r.attempt) == ("ready", 0)
