"""``on_settled``: told once per ending, after the settle landed, under the job's tenant."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from tests.support.execute import (
    attempt,
    claim,
    counts,
    enqueue,
    frozen_driver,
    last_error,
    records,
    row,
    told_input,
)
from ujobs.context import current_actor
from ujobs.drivers.base import LEASE_LAPSED_FINAL_ATTEMPT, ClaimOptions, EnqueueRequest
from ujobs.errors import JobDrainedError, JobInputUnparseableError, JobMaxAttemptsError
from ujobs.execution.attempt import announce_exhausted, execute_job
from ujobs.execution.on_settled import ON_SETTLED_ATTEMPTS
from ujobs.execution.run import Run, Settled
from ujobs.jobs.job import job
from ujobs.jobs.registry import Registry
from ujobs.jobs.retry import Retry
from ujobs.jobs.schema import t
from ujobs.signal import Signal

ORG = "6f1c1b7e-2c1a-4a53-9d2e-0d5f7a1b2c3d"


class Watch:
    """A hook that records what it was told and the row state and tenant it ran under."""

    def __init__(self, driver: Any, *, fail_times: int = 0) -> None:
        self.driver = driver
        self.fail_times = fail_times
        self.calls = 0
        self.told: list[Settled[Any]] = []
        self.states: list[str] = []
        self.orgs: list[str | None] = []

    async def __call__(self, settled: Settled[Any]) -> None:
        self.calls += 1
        self.states.append((await row(self.driver, settled.job_id)).state)
        actor = current_actor()
        self.orgs.append(actor.org_id if actor is not None else "<no actor>")
        if self.calls <= self.fail_times:
            raise RuntimeError(f"hook failure {self.calls}")
        self.told.append(settled)


def _declare(body: Any, hook: Watch, **options: Any) -> Any:
    options.setdefault("retry", Retry(attempts=2, jitter=False))
    return job(
        input=t.object(org_id=t.uuid, n=t.number.int()),
        idempotency_key=lambda i: f"k:{i.n}",
        tenant=lambda i: i.org_id,
        on_settled=hook,
        name=f"t.{body.__name__}",
        **options,
    )(body)


async def test_completed_carries_input_and_result_with_the_row_done() -> None:
    driver, _ = frozen_driver()
    hook = Watch(driver)

    async def counted(run: Run[Any]) -> dict[str, int]:
        return {"rows": run.input.n}

    handle = _declare(counted, hook)
    await enqueue(driver, handle, {"org_id": ORG, "n": 2})
    execution = await attempt(driver, handle, context={"app": 1})
    assert execution.on_settled_error is None
    [s] = hook.told
    assert (s.outcome, s.result, told_input(s).n, s.error, s.code) == (
        "completed",
        {"rows": 2},
        2,
        None,
        None,
    )
    assert s.ctx == {"app": 1}
    assert s.attempt == 1
    assert s.job_id == execution.job_id
    assert s.run_id == execution.run_id
    assert hook.states == ["done"]
    assert hook.orgs == [ORG]


async def test_dead_lettered_carries_input_error_and_code_with_the_row_dead() -> None:
    driver, clock = frozen_driver()
    hook = Watch(driver)

    async def failing(run: Run[Any]) -> None:
        raise TimeoutError("upstream")

    handle = _declare(failing, hook)
    await enqueue(driver, handle, {"org_id": ORG, "n": 1})
    assert (await attempt(driver, handle)).outcome == "retried"
    assert hook.calls == 0  # a retry is not an ending
    clock.advance(1_000)
    assert (await attempt(driver, handle)).outcome == "dead-lettered"
    [s] = hook.told
    assert s.outcome == "dead-lettered"
    assert told_input(s).n == 1
    assert s.code == "X_JOB_MAX_ATTEMPTS"  # the attempts are spent
    assert isinstance(s.error, JobMaxAttemptsError)
    assert isinstance(s.error.__cause__, TimeoutError)  # what the body threw, kept as the cause
    assert s.attempt == 2
    assert hook.states == ["dead"]
    assert hook.orgs == [ORG]


async def test_an_input_that_no_longer_parses_fails_the_attempt_and_tells_input_none() -> None:
    driver, clock = frozen_driver()
    hook = Watch(driver)
    ran: list[int] = []

    async def strict(run: Run[Any]) -> None:
        ran.append(1)

    handle = _declare(strict, hook)
    job_id = (
        await driver.enqueue(
            EnqueueRequest(
                name=handle.name,
                input={"org_id": ORG, "n": "three"},  # an older schema's shape
                idempotency_key="k",
                tenant_id=ORG,
                max_attempts=2,
            )
        )
    ).id
    first = await attempt(driver, handle)
    assert (first.outcome, first.code) == ("retried", "X_JOB_INPUT_UNPARSEABLE")
    assert (await last_error(driver, job_id)).startswith("X_JOB_INPUT_UNPARSEABLE")
    clock.advance(1_000)
    final = await attempt(driver, handle)
    assert final.outcome == "dead-lettered"
    assert ran == []
    [s] = hook.told
    assert (s.outcome, s.input, s.code) == ("dead-lettered", None, "X_JOB_MAX_ATTEMPTS")
    assert isinstance(s.error, JobMaxAttemptsError)
    assert isinstance(s.error.__cause__, JobInputUnparseableError)
    assert hook.orgs == [ORG]  # the row's stamped tenant, since the input cannot say


async def test_dropped_is_told_with_the_row_failed() -> None:
    driver, _ = frozen_driver()
    hook = Watch(driver)

    async def once(run: Run[Any]) -> None:
        raise ValueError("x")

    handle = _declare(once, hook, retry=Retry(attempts=1, dead_letter=False))
    await enqueue(driver, handle, {"org_id": ORG, "n": 1})
    assert (await attempt(driver, handle)).outcome == "dropped"
    assert [s.outcome for s in hook.told] == ["dropped"]
    assert hook.states == ["failed"]


@pytest.mark.parametrize(
    ("state", "dropped", "outcome"),
    [("dead", False, "dead-lettered"), ("failed", True, "dropped")],
)
async def test_a_lease_lapse_on_the_final_attempt_is_buried_and_announced(
    caplog: pytest.LogCaptureFixture, state: str, dropped: bool, outcome: str
) -> None:
    driver, clock = frozen_driver()
    hook = Watch(driver)

    async def kills_its_worker(run: Run[Any]) -> None:
        raise AssertionError("never runs: its worker died")

    handle = _declare(kills_its_worker, hook, retry=Retry(attempts=1, dead_letter=not dropped))
    registry = Registry()
    registry.register_job(handle)
    job_id = await enqueue(driver, handle, {"org_id": ORG, "n": 1})
    await claim(driver, visibility_ms=1_000)  # the worker that took it dies
    clock.advance(1_001)
    announced: list[Any] = []

    async def on_exhausted(rows: Any) -> None:
        announced.extend(await announce_exhausted(rows, jobs=registry, context="ctx"))

    again = await driver.claim(
        ClaimOptions(
            queues=["default"],
            limit=1,
            worker_id="w2",
            on_exhausted=on_exhausted,
            drop_exhausted=frozenset({handle.name}) if dropped else frozenset(),
        )
    )
    assert again == []
    assert (await row(driver, job_id)).state == state
    [s] = hook.told
    assert (s.outcome, s.error, s.code, told_input(s).n, s.ctx) == (
        outcome,
        LEASE_LAPSED_FINAL_ATTEMPT,
        None,
        1,
        "ctx",
    )
    assert hook.states == [state]
    assert hook.orgs == [ORG]
    [logged] = records(caplog, "jobs.claim.exhausted")
    assert logged.levelno == logging.ERROR
    assert [(a.job_id, a.outcome, a.known) for a in announced] == [(job_id, outcome, True)]


async def test_an_unknown_buried_name_is_logged_and_not_told(
    caplog: pytest.LogCaptureFixture,
) -> None:
    driver, clock = frozen_driver()
    await driver.enqueue(EnqueueRequest(name="gone", input={}, idempotency_key="k", max_attempts=1))
    await claim(driver, visibility_ms=10)
    clock.advance(10)
    announced: list[Any] = []

    async def on_exhausted(rows: Any) -> None:
        announced.extend(await announce_exhausted(rows, jobs={}, context=None))

    await driver.claim(
        ClaimOptions(queues=["default"], limit=1, worker_id="w2", on_exhausted=on_exhausted)
    )
    assert [(a.name, a.known) for a in announced] == [("gone", False)]
    assert len(records(caplog, "jobs.claim.exhausted")) == 1


async def test_not_told_for_a_suspension_or_a_drain() -> None:
    driver, _ = frozen_driver()
    hook = Watch(driver)

    async def parks(run: Run[Any]) -> None:
        await run.step.sleep("1d")

    handle = _declare(parks, hook)
    await enqueue(driver, handle, {"org_id": ORG, "n": 1})
    assert (await attempt(driver, handle)).outcome == "suspended"

    async def drained(run: Run[Any]) -> None:
        raise RuntimeError("child killed by the shutdown")

    drain_handle = _declare(drained, hook)
    await enqueue(driver, drain_handle, {"org_id": ORG, "n": 2})
    signal = Signal()
    signal.abort(JobDrainedError("draining"))
    claimed = await claim(driver)
    execution = await execute_job(
        claimed, driver=driver, handle=drain_handle, context=None, signal=signal
    )
    assert execution.outcome == "interrupted"
    assert hook.calls == 0


async def test_a_hook_failing_twice_then_succeeding_is_told_three_times_and_reports_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    driver, _ = frozen_driver()
    hook = Watch(driver, fail_times=2)

    async def fine(run: Run[Any]) -> int:
        return 1

    handle = _declare(fine, hook)
    await enqueue(driver, handle, {"org_id": ORG, "n": 1})
    execution = await attempt(driver, handle)
    assert hook.calls == 3
    assert len(hook.told) == 1
    assert execution.on_settled_error is None
    assert records(caplog, "jobs.on-settled.failed") == []


async def test_a_hook_that_keeps_throwing_is_logged_and_reported_never_changing_the_row(
    caplog: pytest.LogCaptureFixture,
) -> None:
    driver, _ = frozen_driver()
    hook = Watch(driver, fail_times=99)

    async def fine(run: Run[Any]) -> int:
        return 1

    handle = _declare(fine, hook)
    job_id = await enqueue(driver, handle, {"org_id": ORG, "n": 1})
    execution = await attempt(driver, handle)
    assert hook.calls == ON_SETTLED_ATTEMPTS == 3
    assert execution.outcome == "completed"
    assert execution.result == 1
    assert execution.settled
    assert execution.jobs_total == "ok"
    assert execution.on_settled_error is not None
    assert execution.on_settled_error.code == "X_JOB_ON_SETTLED_FAILED"
    assert (await row(driver, job_id)).state == "done"
    assert (await counts(driver, handle.name)) == {"done": 1, "retried": 0, "failed": 0, "dead": 0}
    [logged] = records(caplog, "jobs.on-settled.failed")
    assert logged.levelno == logging.ERROR
    assert logged.code == "X_JOB_ON_SETTLED_FAILED"  # type: ignore[attr-defined]
    assert logged.tries == 3  # type: ignore[attr-defined]


async def test_a_stale_claims_settle_answers_false_logs_unowned_and_tells_nobody(
    caplog: pytest.LogCaptureFixture,
) -> None:
    driver, clock = frozen_driver()
    hook = Watch(driver)

    async def slow(run: Run[Any]) -> str:
        # While this body runs its lease lapses and another worker claims the row.
        clock.advance(31_000)
        await claim(driver, worker="w2")
        return "late"

    handle = _declare(slow, hook)
    job_id = await enqueue(driver, handle, {"org_id": ORG, "n": 1})
    execution = await attempt(driver, handle)
    assert execution.outcome == "completed"
    assert execution.settled is False
    assert execution.jobs_total is None
    assert hook.calls == 0
    r = await row(driver, job_id)
    assert (r.state, r.claimed_by, r.attempt) == ("running", "w2", 2)
    [logged] = records(caplog, "jobs.settle.unowned")
    assert logged.levelno == logging.WARNING
    assert logged.worker_id == "w1"  # type: ignore[attr-defined]
