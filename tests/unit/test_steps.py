"""``step.run`` and ``step.sleep`` driven by hand against the memory driver."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import BaseModel

from tests.support.execute import claim, enqueue, frozen_driver
from ujobs.drivers.base import ClaimedJob, NackOptions
from ujobs.drivers.memory.driver import MemoryDriver
from ujobs.errors import (
    InvariantError,
    JobAbortedError,
    JobTimeoutError,
    LeaseLostError,
    StepDuplicateError,
    StepOutputInvalidError,
)
from ujobs.execution.steps import Step, StepSuspension
from ujobs.jobs.job import job
from ujobs.signal import Signal


@job(idempotency_key="k", tenant="none")
async def stepper(run: Any) -> None:
    """A job whose body the tests never run: they drive its steps by hand."""


async def _claimed() -> tuple[MemoryDriver, ClaimedJob, Any]:
    driver, clock = frozen_driver()
    await enqueue(driver, stepper)
    return driver, await claim(driver), clock


async def _step(
    driver: MemoryDriver, claimed: ClaimedJob, signal: Signal | None = None, **kw: Any
) -> Step:
    return await Step.load(
        driver=driver,
        job_id=claimed.id,
        run_id=claimed.run_id,
        tenant_id=claimed.tenant_id,
        ref=claimed.ref,
        signal=signal or Signal(),
        clock=driver.clock,
        **kw,
    )


async def test_a_completed_step_replays_from_storage_without_calling_fn() -> None:
    driver, claimed, _ = await _claimed()
    calls: list[str] = []

    async def provision(signal: Signal) -> dict[str, Any]:
        calls.append("provision")
        return {"org": "o1"}

    first = await _step(driver, claimed)
    answer: dict[str, Any] = await first.run("provision", provision)
    assert answer == {"org": "o1"}
    stored = await driver.load_steps(claimed.run_id, tenant_id=claimed.tenant_id)
    assert [(s.name, s.output) for s in stored] == [("provision", {"org": "o1"})]

    second = await _step(driver, claimed)
    replayed: dict[str, Any] = await second.run("provision", provision)
    assert replayed == {"org": "o1"}
    assert calls == ["provision"]
    assert second.replayed == ["provision"]


async def test_sync_fn_async_fn_and_a_lambda_answering_a_coroutine() -> None:
    driver, claimed, _ = await _claimed()
    step = await _step(driver, claimed)

    async def later(n: int) -> int:
        await asyncio.sleep(0)
        return n

    assert await step.run("sync", lambda signal: 1) == 1
    coro: int = await step.run("coro", lambda signal: later(2))
    assert coro == 2

    async def native(signal: Signal) -> int:
        assert isinstance(signal, Signal)
        return 3

    answer: int = await step.run("native", native)
    assert answer == 3


@dataclasses.dataclass
class Org:
    id: str
    created: datetime


class Plan(BaseModel):
    name: str
    seats: int


async def test_a_step_answers_its_stored_json_form_on_the_first_run_and_on_replay() -> None:
    driver, claimed, _ = await _claimed()
    when = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    first = await _step(driver, claimed)
    # The answer is the stored JSON form, not the Org / Plan the fn made (``run`` is annotated
    # as answering the fn's own type), hence ``object``.
    org: object = await first.run("org", lambda s: Org("o1", when))
    plan: object = await first.run("plan", lambda s: Plan(name="pro", seats=3))
    assert org == {"id": "o1", "created": "2026-01-02T03:04:05+00:00"}
    assert plan == {"name": "pro", "seats": 3}
    replay = await _step(driver, claimed)
    # ``object`` again: a fn that can only fail would otherwise type the answer as NoReturn.
    org_again: object = await replay.run("org", lambda s: pytest.fail("replayed"))
    assert org_again == org
    plan_again: object = await replay.run("plan", lambda s: pytest.fail("replayed"))
    assert plan_again == plan


@pytest.mark.parametrize(
    "value",
    [{1, 2}, object(), {"ratio": float("nan")}, [float("inf")], {1: "non-string key"}],
    ids=["set", "object", "nan", "inf", "int-key"],
)
async def test_a_result_json_cannot_store_is_x_step_output_invalid_naming_the_step(
    value: Any,
) -> None:
    driver, claimed, _ = await _claimed()
    step = await _step(driver, claimed)
    with pytest.raises(StepOutputInvalidError) as info:
        await step.run("charge", lambda s: value)
    assert info.value.code == "X_STEP_OUTPUT_INVALID"
    assert "'charge'" in info.value.message
    assert info.value.meta["step"] == "charge"
    assert await driver.load_steps(claimed.run_id, tenant_id=claimed.tenant_id) == []


async def test_a_repeated_name_is_x_step_duplicate_also_across_replayed_and_new() -> None:
    driver, claimed, _ = await _claimed()
    step = await _step(driver, claimed)
    await step.run("a", lambda s: 1)
    with pytest.raises(StepDuplicateError) as info:
        await step.run("a", lambda s: 2)
    assert info.value.code == "X_STEP_DUPLICATE"

    replay = await _step(driver, claimed)
    assert await replay.run("a", lambda s: 3) == 1  # replayed
    with pytest.raises(StepDuplicateError):
        await replay.run("a", lambda s: 4)  # the same name again, new this time
    with pytest.raises(StepDuplicateError):
        await replay.sleep("a", "1s")  # one namespace for every kind of step


async def test_a_failed_step_spends_its_name_in_the_run() -> None:
    driver, claimed, _ = await _claimed()
    step = await _step(driver, claimed)

    def boom(signal: Signal) -> None:
        raise RuntimeError("flaky")

    with pytest.raises(RuntimeError):
        await step.run("a", boom)
    with pytest.raises(StepDuplicateError):
        await step.run("a", lambda s: 1)
    assert await driver.load_steps(claimed.run_id, tenant_id=claimed.tenant_id) == []


async def test_bad_names_are_refused() -> None:
    driver, claimed, _ = await _claimed()
    step = await _step(driver, claimed)
    for bad in ["", "   ", "x" * 201, "approval#wait-start", 3]:
        with pytest.raises(InvariantError):
            await step.run(bad, lambda s: 1)  # type: ignore[call-overload]


async def test_a_refused_save_means_the_claim_is_gone() -> None:
    driver, claimed, _ = await _claimed()
    step = await _step(driver, claimed)
    assert await driver.nack(claimed.id, claimed.ref, NackOptions(count=False))
    with pytest.raises(LeaseLostError) as info:
        await step.run("a", lambda s: 1)
    assert info.value.code == "X_JOB_LEASE_LOST"
    assert await driver.load_steps(claimed.run_id, tenant_id=claimed.tenant_id) == []


async def test_an_aborted_attempt_refuses_to_start_a_step() -> None:
    driver, claimed, _ = await _claimed()
    signal = Signal()
    step = await _step(driver, claimed, signal)
    signal.abort(JobTimeoutError("deadline"))
    called: list[int] = []
    with pytest.raises(JobAbortedError) as info:
        await step.run("a", lambda s: called.append(1))
    assert info.value.code == "X_ABORTED"
    assert info.value.meta["reason"] == "X_JOB_TIMEOUT"
    assert called == []


async def test_an_abort_during_fn_refuses_the_save() -> None:
    driver, claimed, _ = await _claimed()
    signal = Signal()
    step = await _step(driver, claimed, signal)

    async def slow(step_signal: Signal) -> int:
        signal.abort(JobTimeoutError("deadline"))
        assert step_signal.aborted  # the step's signal follows the attempt's
        return 1

    with pytest.raises(JobAbortedError):
        await step.run("a", slow)
    assert await driver.load_steps(claimed.run_id, tenant_id=claimed.tenant_id) == []


async def test_step_timeout_aborts_the_steps_signal_then_fails_it() -> None:
    driver, claimed, _ = await _claimed()
    step = await _step(driver, claimed, step_timeout_ms=20)
    seen: list[Any] = []

    async def hangs(signal: Signal) -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            seen.append(signal.reason)
            raise

    with pytest.raises(JobTimeoutError) as info:
        await step.run("slow", hangs)
    assert info.value.code == "X_JOB_TIMEOUT"
    assert info.value.meta == {"step": "slow", "timeoutMs": 20}
    assert len(seen) == 1
    assert isinstance(seen[0], JobTimeoutError)
    assert await driver.load_steps(claimed.run_id, tenant_id=claimed.tenant_id) == []
    assert await step.run("fast", lambda s: 1) == 1  # only the step failed, not the attempt


async def test_step_timeout_does_not_wait_for_a_step_that_swallows_the_cancel() -> None:
    driver, claimed, _ = await _claimed()
    step = await _step(driver, claimed, step_timeout_ms=20)
    release = asyncio.Event()

    async def stubborn(signal: Signal) -> int:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await release.wait()
        return 1

    with pytest.raises(JobTimeoutError):
        await step.run("stubborn", stubborn)
    release.set()
    await asyncio.sleep(0)
    assert await driver.load_steps(claimed.run_id, tenant_id=claimed.tenant_id) == []


async def test_sleep_suspends_records_the_wake_time_and_passes_through_after_it() -> None:
    driver, claimed, clock = await _claimed()
    step = await _step(driver, claimed)
    with pytest.raises(StepSuspension) as info:
        await step.sleep("3d")
    wake = clock.now_ms() + 3 * 86_400_000
    assert info.value.resume_at_ms == wake
    assert info.value.step == "sleep:3d"
    stored = await driver.load_steps(claimed.run_id, tenant_id=claimed.tenant_id)
    assert [(s.name, s.output) for s in stored] == [("sleep:3d", {"wakeAtMs": wake})]

    early = await _step(driver, claimed)
    with pytest.raises(StepSuspension) as again:
        await early.sleep("3d")
    assert again.value.resume_at_ms == wake  # woken early: parked again until the same time

    clock.set(wake)
    woke = await _step(driver, claimed)
    assert await woke.sleep("3d") is None  # type: ignore[func-returns-value]  # pinned on purpose
    assert await woke.run("nudge", lambda s: "sent") == "sent"


async def test_named_sleep_and_a_swallowed_suspension_stays_suspended() -> None:
    driver, claimed, clock = await _claimed()
    step = await _step(driver, claimed)
    try:
        await step.sleep("nap", "10s")
    except StepSuspension:
        pass
    assert step.suspension is not None
    assert step.suspension.step == "nap"
    assert step.suspension.resume_at_ms == clock.now_ms() + 10_000
    with pytest.raises(StepSuspension):
        await step.run("after", lambda s: 1)
    with pytest.raises(InvariantError):
        await (await _step(driver, claimed)).sleep("nap", "ten seconds")


async def test_sleep_is_a_step_write_refused_past_the_abort() -> None:
    driver, claimed, _ = await _claimed()
    signal = Signal()
    step = await _step(driver, claimed, signal)
    signal.abort(JobTimeoutError("deadline"))
    with pytest.raises(JobAbortedError):
        await step.sleep("1h")
    assert await driver.load_steps(claimed.run_id, tenant_id=claimed.tenant_id) == []


async def test_a_closed_runner_refuses_every_write() -> None:
    driver, claimed, _ = await _claimed()
    step = await _step(driver, claimed)
    step.close(JobAbortedError("settled"))
    with pytest.raises(JobAbortedError):
        await step.run("late", lambda s: 1)
