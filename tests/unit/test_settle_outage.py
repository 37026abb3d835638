"""When the store is away (``ujobs.execution.outage``): a settle sent again until it lands, but
never past the lease the worker holds; an attempt the outage failed handed back uncounted, a
few times per row at most. The memory driver with a store that goes away (the outside world)
and a frozen clock."""

from __future__ import annotations

from typing import Any

import pytest

import ujobs.execution.outage as execute_outage
from tests.support.execute import T0, claim, records, row
from tests.support.worker import Gate, declare, enqueue, make_worker, settled
from ujobs.clock import FrozenClock
from ujobs.drivers.base import ClaimRef, NackOptions, StepRecord
from ujobs.drivers.memory.driver import MemoryDriver
from ujobs.errors import DriverUnreachableError
from ujobs.execution.attempt import execute_job
from ujobs.execution.outage import MAX_UNREACHABLE_RETURNS
from ujobs.execution.run import Run

WINDOW = 30_000
INTERVAL = 10_000


class AwayDriver(MemoryDriver):
    """The memory driver whose store is unreachable for the next ``away[op]`` calls of an
    operation (-1: for good), each failed call moving the clock ``step_ms`` on."""

    def __init__(self, clock: FrozenClock, *, step_ms: int = 0) -> None:
        super().__init__(clock=clock)
        self.frozen = clock
        self.step_ms = step_ms
        self.away: dict[str, int] = {}
        self.calls: dict[str, int] = {}

    def _reach(self, op: str) -> None:
        self.calls[op] = self.calls.get(op, 0) + 1
        left = self.away.get(op, 0)
        if left == 0:
            return
        self.away[op] = left - 1 if left > 0 else left
        self.frozen.advance(self.step_ms)
        raise DriverUnreachableError(
            f"the store is away ({op})", meta={"driver": "memory", "operation": op}
        )

    async def ack(
        self,
        job_id: str,
        ref: ClaimRef,
        *,
        duration_ms: int | None = None,
        result: str | None = None,
        slot: str | None = None,
    ) -> bool:
        self._reach("ack")
        return await super().ack(job_id, ref, duration_ms=duration_ms, result=result, slot=slot)

    async def nack(
        self, job_id: str, ref: ClaimRef, options: NackOptions, *, slot: str | None = None
    ) -> bool:
        self._reach("nack")
        return await super().nack(job_id, ref, options, slot=slot)

    async def load_steps(self, run_id: str, *, tenant_id: str | None) -> list[StepRecord]:
        self._reach("load_steps")
        return await super().load_steps(run_id, tenant_id=tenant_id)


@pytest.fixture(autouse=True)
def _quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """The retry schedule's shape, in milliseconds a test can afford."""
    monkeypatch.setattr(execute_outage, "SETTLE_RETRY_FIRST_MS", 2)
    monkeypatch.setattr(execute_outage, "SETTLE_RETRY_MAX_MS", 8)


async def one_step(run: Run[Any]) -> str:
    return str(await run.step.run("only", lambda _: "saved"))


def away_driver(*, step_ms: int = 0) -> tuple[AwayDriver, FrozenClock]:
    clock = FrozenClock(T0)
    return AwayDriver(clock, step_ms=step_ms), clock


async def test_a_settle_the_store_could_not_take_is_sent_again_until_it_lands(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level("INFO", logger="ujobs.jobs")
    driver, _ = away_driver()
    handle = declare(one_step)
    job_id = await enqueue(driver, handle, 1)
    driver.away["ack"] = 3
    execution = await execute_job(await claim(driver), driver=driver, handle=handle, context=None)
    assert (execution.outcome, execution.settled, execution.jobs_total) == ("completed", True, "ok")
    assert driver.calls["ack"] == 4
    found = await row(driver, job_id)
    assert (found.state, found.attempt) == ("done", 1)
    (retrying,) = records(caplog, "jobs.settle.retrying")
    assert retrying.__dict__["job_id"] == job_id
    assert "X_DRIVER_UNREACHABLE" in retrying.__dict__["error"]
    (recovered,) = records(caplog, "jobs.settle.recovered")
    assert recovered.__dict__["tries"] == 4
    assert records(caplog, "jobs.settle.failed") == []


async def test_the_worker_stops_sending_it_when_the_lease_it_holds_ends(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Each failed try takes 5 s. The window counts from the last renewal that LANDED
    # (T0 + 10 s), not from the claim: the lease ends at T0 + 40 s, so the ack is sent at +15,
    # +20, +25, +30 and +35, and given up when that last try fails as the lease ends (counted
    # from the claim it would have stopped after three).
    gate = Gate()
    driver, clock = away_driver(step_ms=5_000)
    handle = declare(gate)
    job_id = await enqueue(driver, handle, 1)
    worker = make_worker(
        driver, [handle], visibility_timeout_ms=WINDOW, heartbeat_interval_ms=INTERVAL
    )
    await worker.run_once()
    await gate.entered.wait()
    clock.advance(INTERVAL)
    await worker.heartbeat_once()
    assert (await row(driver, job_id)).lease_expires_at_ms == T0 + INTERVAL + WINDOW
    clock.advance(5_000)
    driver.away["ack"] = -1
    gate.open.set()
    (execution,) = await settled(worker, 1)
    assert execution.settled is False
    assert execution.jobs_total is None
    assert driver.calls["ack"] == 5
    assert clock.now_ms() == T0 + INTERVAL + WINDOW
    (failed,) = records(caplog, "jobs.settle.failed")
    assert (failed.__dict__["tries"], failed.__dict__["lease_left_ms"]) == (5, 0)
    found = await row(driver, job_id)
    assert (found.state, found.attempt) == ("running", 1)  # its lease lapses on its own


async def test_an_attempt_the_store_failed_is_handed_back_uncounted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level("INFO", logger="ujobs.jobs")
    driver, _ = away_driver()
    handle = declare(one_step)
    job_id = await enqueue(driver, handle, 1)
    driver.away["load_steps"] = 1
    first = await execute_job(await claim(driver), driver=driver, handle=handle, context=None)
    assert (first.outcome, first.code, first.settled) == (
        "interrupted",
        "X_DRIVER_UNREACHABLE",
        True,
    )
    assert (first.attempt_counted, first.jobs_total) == (False, None)
    found = await row(driver, job_id)
    assert (found.state, found.attempt, found.last_error) == ("ready", 0, None)
    assert driver.state.rows[job_id].unreachable_returns == 1
    (interrupted,) = records(caplog, "jobs.attempt.interrupted")
    assert interrupted.__dict__["code"] == "X_DRIVER_UNREACHABLE"
    again = await claim(driver)
    assert again.attempt == 1  # the same attempt, presented again
    second = await execute_job(again, driver=driver, handle=handle, context=None)
    assert (second.outcome, second.result) == ("completed", "saved")


async def test_a_body_failing_on_a_connection_of_its_own_is_an_ordinary_counted_failure() -> None:
    # Only the driver's own X_DRIVER_UNREACHABLE qualifies; the driver's here is raised by a
    # step the body called, the other is the body's own client failing.
    async def own_client(run: Run[Any]) -> None:
        if run.input.n == 1:
            raise ConnectionRefusedError("the body's own database")
        await run.step.run("only", lambda _: "saved")

    driver, _ = away_driver()
    handle = declare(own_client, retry={"attempts": 3})
    own = await enqueue(driver, handle, 1)
    ours = await enqueue(driver, handle, 2)
    driver.away["load_steps"] = 1
    outcomes = {}
    for _ in range(2):
        claimed = await claim(driver)
        execution = await execute_job(claimed, driver=driver, handle=handle, context=None)
        outcomes[claimed.id] = execution.outcome
    assert outcomes == {own: "retried", ours: "interrupted"}
    assert (await row(driver, own)).attempt == 1
    assert (await row(driver, ours)).attempt == 0


async def test_a_row_is_handed_back_uncounted_at_most_the_cap_then_attempts_count(
    caplog: pytest.LogCaptureFixture,
) -> None:
    driver, _ = away_driver()
    handle = declare(one_step, retry={"attempts": 2, "delay": 0})
    job_id = await enqueue(driver, handle, 1)
    driver.away["load_steps"] = -1  # every attempt fails on the store, for good
    seen = []
    for _ in range(MAX_UNREACHABLE_RETURNS + 2):
        claimed = await claim(driver)
        execution = await execute_job(claimed, driver=driver, handle=handle, context=None)
        seen.append((claimed.attempt, execution.outcome, execution.settled))
    assert seen == [
        *[(1, "interrupted", True)] * MAX_UNREACHABLE_RETURNS,
        (1, "retried", True),
        (2, "dead-lettered", True),
    ]
    assert driver.state.rows[job_id].unreachable_returns == MAX_UNREACHABLE_RETURNS
    found = await row(driver, job_id)
    assert (found.state, found.attempt) == ("dead", 2)
    capped = [r for r in records(caplog, "jobs.attempt.failed") if "unreachable_cap" in r.__dict__]
    assert [r.__dict__["outcome"] for r in capped] == ["retried", "dead-lettered"]
    assert records(caplog, "jobs.settle.unowned") == []  # the capped hand-back is not a loss
