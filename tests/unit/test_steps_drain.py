"""A drain never aborts a call already on the wire; it stops one not yet sent. The deadline and
a lost lease keep refusing every write. And the stored steps are read on first use only."""

from __future__ import annotations

import pytest

from tests.support.execute import claim, enqueue, frozen_driver
from tests.unit.test_steps import stepper
from ujobs.drivers.base import ClaimedJob, StepRecord
from ujobs.drivers.memory.driver import MemoryDriver
from ujobs.errors import JobAbortedError, JobDrainedError, JobTimeoutError, LeaseLostError
from ujobs.execution.steps import Step
from ujobs.signal import Signal


class CountingDriver(MemoryDriver):
    def __init__(self) -> None:
        super().__init__(clock=frozen_driver()[1])
        self.loads = 0

    async def load_steps(self, run_id: str, *, tenant_id: str | None) -> list[StepRecord]:
        self.loads += 1
        return await super().load_steps(run_id, tenant_id=tenant_id)


async def _lazy(driver: MemoryDriver, claimed: ClaimedJob, signal: Signal) -> Step:
    return Step.lazy(
        driver=driver,
        job_id=claimed.id,
        run_id=claimed.run_id,
        tenant_id=claimed.tenant_id,
        ref=claimed.ref,
        signal=signal,
        clock=driver.clock,
    )


async def _setup(driver: MemoryDriver | None = None) -> tuple[MemoryDriver, ClaimedJob]:
    driver = driver or frozen_driver()[0]
    await enqueue(driver, stepper)
    return driver, await claim(driver)


async def test_a_step_running_when_the_drain_began_is_saved() -> None:
    driver, claimed = await _setup()
    signal = Signal()
    step = await _lazy(driver, claimed, signal)

    async def post(step_signal: Signal) -> str:
        signal.abort(JobDrainedError("worker w1 is draining (SIGTERM)"))
        assert step_signal.aborted  # it is told; it may still finish
        return "sent"

    sent: str = await step.run("post", post)
    assert sent == "sent"
    assert [
        s.name for s in await driver.load_steps(claimed.run_id, tenant_id=claimed.tenant_id)
    ] == ["post"]


async def test_a_step_not_yet_started_under_a_drain_is_refused_with_x_draining() -> None:
    driver, claimed = await _setup()
    signal = Signal()
    step = await _lazy(driver, claimed, signal)
    signal.abort(JobDrainedError("draining"))
    called: list[int] = []
    with pytest.raises(JobDrainedError) as info:
        await step.run("post", lambda s: called.append(1))
    assert info.value.code == "X_DRAINING"
    assert called == []
    with pytest.raises(JobDrainedError):
        await step.sleep("nap", "1h")  # a sleep is a new step too
    assert await driver.load_steps(claimed.run_id, tenant_id=claimed.tenant_id) == []


@pytest.mark.parametrize(
    "reason",
    [JobTimeoutError("deadline"), LeaseLostError("the heartbeat found another claim")],
)
async def test_the_deadline_and_a_lost_lease_refuse_even_a_running_step(
    reason: BaseException,
) -> None:
    driver, claimed = await _setup()
    signal = Signal()
    step = await _lazy(driver, claimed, signal)

    async def post(step_signal: Signal) -> str:
        signal.abort(reason)
        return "sent"

    with pytest.raises(JobAbortedError) as info:
        await step.run("post", post)
    assert info.value.code == "X_ABORTED"
    assert await driver.load_steps(claimed.run_id, tenant_id=claimed.tenant_id) == []


async def test_nothing_is_written_once_the_attempt_is_settled_even_under_a_drain() -> None:
    driver, claimed = await _setup()
    signal = Signal()
    step = await _lazy(driver, claimed, signal)

    async def post(step_signal: Signal) -> str:
        signal.abort(JobDrainedError("draining"))
        step.close(JobAbortedError("settled"))
        return "sent"

    with pytest.raises(JobAbortedError):
        await step.run("post", post)
    assert await driver.load_steps(claimed.run_id, tenant_id=claimed.tenant_id) == []


async def test_the_stored_steps_are_read_once_on_first_use_and_never_without_one() -> None:
    driver, claimed = await _setup(CountingDriver())
    assert isinstance(driver, CountingDriver)
    untouched = await _lazy(driver, claimed, Signal())
    assert untouched.suspension is None
    assert driver.loads == 0
    step = await _lazy(driver, claimed, Signal())
    await step.run("a", lambda s: 1)
    await step.run("b", lambda s: 2)
    assert driver.loads == 1
    replay = await _lazy(driver, claimed, Signal())
    assert await replay.run("a", lambda s: 99) == 1
    assert replay.replayed == ["a"]
    assert driver.loads == 2
