"""``execute_job``: the spec's onboardOrg, every row of the outcome table, and finalAttempt."""

from __future__ import annotations

import asyncio
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
    steps_of,
    told_input,
)
from ujobs.context import current_actor, current_traceparent, require_tenant
from ujobs.drivers.base import EnqueueRequest
from ujobs.errors import (
    JobDrainedError,
    JobMaxAttemptsError,
    JobTimeoutError,
    TenancyActorOrgRequiredError,
    UltimateError,
    register_error_retry,
)
from ujobs.events.bus import memory_event_bus
from ujobs.execution.attempt import execute_job, hand_back, refuse_job
from ujobs.execution.run import Run, Settled
from ujobs.jobs.job import job
from ujobs.jobs.retry import Retry
from ujobs.jobs.schema import t
from ujobs.signal import Signal

ORG = "0b6c3f0e-8f5c-4f43-9d77-4b6a3a1c8e10"

register_error_retry({"X_TEST_TERMINAL": "terminal"})


class Terminal(UltimateError):
    code = "X_TEST_TERMINAL"


async def test_onboard_org_replays_provision_from_storage_when_welcome_email_fails() -> None:
    driver, clock = frozen_driver()
    provisioned: list[str] = []
    emails: list[str] = []
    settled: list[Settled[Any]] = []

    async def provision(org_id: str) -> dict[str, str]:
        provisioned.append(org_id)
        return {"id": org_id, "name": "Acme"}

    async def send_welcome(org: dict[str, str]) -> None:
        emails.append(org["name"])
        if len(emails) == 1:
            raise ConnectionError("smtp down")

    async def on_settled(s: Settled[Any]) -> None:
        settled.append(s)

    @job(
        input=t.object(org_id=t.uuid),
        idempotency_key=lambda i: f"onboard:{i.org_id}",
        tenant=lambda i: i.org_id,
        retry=Retry(attempts=5, backoff="exponential", jitter=False),
        on_settled=on_settled,
    )
    async def onboard_org(run: Run[Any]) -> str:
        org: dict[str, str] = await run.step.run(
            "provision", lambda signal: provision(run.input.org_id)
        )
        await run.step.run(
            "welcome-email",
            lambda signal: send_welcome(org),
        )
        await run.step.sleep("3d")
        await run.step.run("nudge", lambda signal: "nudged")
        return str(org["id"])

    job_id = await enqueue(driver, onboard_org, {"org_id": ORG})

    first = await attempt(driver, onboard_org)
    assert (first.outcome, first.attempt, first.code) == ("retried", 1, None)
    assert "ConnectionError: smtp down" in await last_error(driver, job_id)
    assert first.resume_at_ms == clock.now_ms() + 1_000

    clock.advance(1_000)
    second = await attempt(driver, onboard_org)
    assert (second.outcome, second.attempt) == ("suspended", 2)
    assert provisioned == [ORG]  # replayed from storage, not run again
    assert emails == ["Acme", "Acme"]  # only the failed step ran again
    assert (await row(driver, job_id)).state == "suspended"

    assert second.resume_at_ms is not None
    clock.set(second.resume_at_ms)
    third = await attempt(driver, onboard_org)
    assert (third.outcome, third.attempt, third.result) == ("completed", 2, ORG)
    assert provisioned == [ORG]
    assert emails == ["Acme", "Acme"]
    steps = [s.name for s in await steps_of(driver, job_id)]
    assert steps == ["provision", "welcome-email", "sleep:3d", "nudge"]
    assert [s.outcome for s in settled] == ["completed"]
    assert settled[0].result == ORG
    assert told_input(settled[0]).org_id == ORG


# --- the outcome table, one row at a time ----------------------------------------------------


def _declare(body: Any, **options: Any) -> Any:
    options.setdefault("retry", Retry(attempts=3, jitter=False))
    return job(idempotency_key="k", tenant="none", name=f"t.{body.__name__}", **options)(body)


async def test_the_body_returning_is_completed_and_counted_ok() -> None:
    driver, _ = frozen_driver()

    async def returns(run: Run[Any]) -> dict[str, int]:
        return {"rows": 2}

    handle = _declare(returns)
    job_id = await enqueue(driver, handle)
    execution = await attempt(driver, handle)
    assert execution.outcome == "completed"
    assert execution.result == {"rows": 2}
    assert execution.settled
    assert execution.jobs_total == "ok"
    assert execution.attempt_counted is None
    assert (await row(driver, job_id)).state == "done"
    assert (await counts(driver, handle.name))["done"] == 1


async def test_a_suspension_is_uncounted_and_presented_again_under_the_same_number() -> None:
    driver, clock = frozen_driver()
    attempts_seen: list[tuple[int, bool]] = []

    async def sleeps(run: Run[Any]) -> None:
        attempts_seen.append((run.attempt, run.final_attempt))
        await run.step.sleep("1h")

    handle = _declare(sleeps, retry=Retry(attempts=1))
    job_id = await enqueue(driver, handle)
    execution = await attempt(driver, handle)
    assert execution.outcome == "suspended"
    assert execution.attempt_counted is False
    assert execution.jobs_total is None
    assert execution.resume_at_ms == clock.now_ms() + 3_600_000
    r = await row(driver, job_id)
    assert (r.state, r.attempt, r.run_at_ms) == ("suspended", 0, execution.resume_at_ms)
    assert (await counts(driver, handle.name)) == {"done": 0, "retried": 0, "failed": 0, "dead": 0}

    clock.set(execution.resume_at_ms)
    woke = await attempt(driver, handle)
    assert woke.outcome == "completed"
    # attempts=1: both deliveries are attempt 1, the final one — a sleep burned nothing.
    assert attempts_seen == [(1, True), (1, True)]


async def test_throwing_with_attempts_left_is_retried_and_counted() -> None:
    driver, clock = frozen_driver()

    async def throws(run: Run[Any]) -> None:
        raise ValueError("nope")

    handle = _declare(throws)
    job_id = await enqueue(driver, handle)
    execution = await attempt(driver, handle)
    assert execution.outcome == "retried"
    assert execution.attempt_counted is True
    assert execution.jobs_total == "failed"
    assert execution.stop_reason is None
    r = await row(driver, job_id)
    assert (r.state, r.attempt, r.run_at_ms) == ("ready", 1, clock.now_ms() + 1_000)
    assert r.last_error is not None
    assert r.last_error.startswith("ValueError: nope")
    assert (await counts(driver, handle.name))["retried"] == 1


async def test_throwing_with_none_left_is_dead_lettered() -> None:
    driver, clock = frozen_driver()

    async def always(run: Run[Any]) -> None:
        raise ValueError("still no")

    handle = _declare(always, retry=Retry(attempts=2, jitter=False))
    job_id = await enqueue(driver, handle)
    assert (await attempt(driver, handle)).outcome == "retried"
    clock.advance(1_000)
    execution = await attempt(driver, handle)
    assert execution.outcome == "dead-lettered"
    assert execution.stop_reason == "attempts-exhausted"
    assert execution.jobs_total == "dead"
    assert execution.attempt_counted is True
    r = await row(driver, job_id)
    assert (r.state, r.attempt) == ("dead", 2)
    assert r.last_error is not None
    assert "stop: attempts-exhausted" in r.last_error
    assert (await counts(driver, handle.name))["dead"] == 1


async def test_a_terminal_error_dead_letters_at_once_and_says_why() -> None:
    driver, _ = frozen_driver()

    async def rejected(run: Run[Any]) -> None:
        raise Terminal("the gateway rejected the invoice")

    handle = _declare(rejected, retry=Retry(attempts=5))
    job_id = await enqueue(driver, handle)
    execution = await attempt(driver, handle)
    assert execution.outcome == "dead-lettered"
    assert execution.stop_reason == "terminal"
    assert execution.code == "X_TEST_TERMINAL"
    r = await row(driver, job_id)
    assert (r.state, r.attempt) == ("dead", 1)
    assert r.last_error is not None
    first, verdict = r.last_error.splitlines()[:2]
    assert first == "X_TEST_TERMINAL: the gateway rejected the invoice"
    assert verdict.startswith("stop: terminal")
    assert "attempt 1 of 5" in verdict


async def test_dead_letter_false_drops_the_row_as_failed() -> None:
    driver, _ = frozen_driver()

    async def dropped(run: Run[Any]) -> None:
        raise Terminal("no")

    handle = _declare(dropped, retry=Retry(attempts=3, dead_letter=False))
    job_id = await enqueue(driver, handle)
    execution = await attempt(driver, handle)
    assert execution.outcome == "dropped"
    assert execution.jobs_total == "failed"
    assert execution.attempt_counted is True
    assert (await row(driver, job_id)).state == "failed"
    assert (await counts(driver, handle.name))["failed"] == 1


async def test_a_drain_that_unwinds_the_body_is_interrupted_and_uncounted() -> None:
    driver, clock = frozen_driver()
    started = asyncio.Event()

    async def long(run: Run[Any]) -> None:
        started.set()
        await run.signal.wait()
        run.signal.throw_if_aborted()

    handle = _declare(long, retry=Retry(attempts=1))
    job_id = await enqueue(driver, handle)
    claimed = await claim(driver)
    worker_signal = Signal()
    running = asyncio.create_task(
        execute_job(claimed, driver=driver, handle=handle, context=None, signal=worker_signal)
    )
    await started.wait()
    worker_signal.abort(JobDrainedError("worker w1 is draining (SIGTERM)"))
    execution = await running
    assert execution.outcome == "interrupted"
    assert execution.code == "X_DRAINING"
    assert execution.attempt_counted is False
    assert execution.jobs_total is None
    r = await row(driver, job_id)
    # attempts=1 survives the deploy: the attempt was handed back, due at once.
    assert (r.state, r.attempt, r.run_at_ms) == ("ready", 0, clock.now_ms())
    assert (await counts(driver, handle.name)) == {"done": 0, "retried": 0, "failed": 0, "dead": 0}


async def test_a_drain_the_body_finishes_through_is_completed() -> None:
    driver, _ = frozen_driver()
    worker_signal = Signal()

    async def finishes(run: Run[Any]) -> str:
        worker_signal.abort(JobDrainedError("draining"))
        assert run.signal.aborted
        return "done anyway"

    handle = _declare(finishes)
    await enqueue(driver, handle)
    execution = await attempt(driver, handle, signal=worker_signal)
    assert (execution.outcome, execution.result) == ("completed", "done anyway")


async def test_a_drain_before_the_body_starts_never_runs_it() -> None:
    driver, _ = frozen_driver()
    ran: list[int] = []

    async def never(run: Run[Any]) -> None:
        ran.append(1)

    handle = _declare(never)
    await enqueue(driver, handle)
    worker_signal = Signal()
    worker_signal.abort(JobDrainedError("draining"))
    execution = await attempt(driver, handle, signal=worker_signal)
    assert execution.outcome == "interrupted"
    assert ran == []


async def test_refused_over_a_busy_key_fails_the_row_uncounted() -> None:
    driver, _ = frozen_driver()
    told: list[Settled[Any]] = []
    states: list[str] = []
    ran: list[int] = []

    async def hook(s: Settled[Any]) -> None:
        told.append(s)
        states.append((await row(driver, s.job_id)).state)

    async def sync_account(run: Run[Any]) -> None:
        ran.append(1)

    handle = job(
        input=t.object(account_id=t.string),
        idempotency_key=lambda i: f"sync:{i.account_id}",
        tenant="none",
        concurrency={"key": lambda i: i.account_id, "limit": 1, "when_busy": "fail"},
        on_settled=hook,
        name="t.sync_account",
        run=sync_account,
    )
    job_id = await enqueue(driver, handle, {"account_id": "a1"})
    claimed = await claim(driver)
    execution = await refuse_job(claimed, driver=driver, handle=handle, context="ctx")
    assert execution.outcome == "refused"
    assert execution.attempt_counted is False
    assert execution.jobs_total == "failed"
    assert execution.code == "X_JOB_KEY_BUSY"
    r = await row(driver, job_id)
    assert (r.state, r.attempt) == ("failed", 0)
    assert r.last_error is not None
    assert r.last_error.startswith("X_JOB_KEY_BUSY")
    assert (await counts(driver, handle.name))["failed"] == 1
    assert ran == []
    assert [(s.outcome, s.code, told_input(s).account_id, s.ctx) for s in told] == [
        ("refused", "X_JOB_KEY_BUSY", "a1", "ctx")
    ]
    assert states == ["failed"]


async def test_an_unknown_job_name_is_handed_back_not_dead_lettered(
    caplog: pytest.LogCaptureFixture,
) -> None:
    driver, clock = frozen_driver()
    job_id = (
        await driver.enqueue(
            EnqueueRequest(name="jobs.from_a_newer_deploy", input={}, idempotency_key="k")
        )
    ).id
    claimed = await claim(driver)
    execution = await hand_back(claimed, driver=driver, reason="unknown-job")
    assert execution.outcome == "handed-back"
    assert execution.settled
    assert execution.jobs_total is None
    r = await row(driver, job_id)
    assert (r.state, r.attempt, r.run_at_ms) == ("ready", 0, clock.now_ms() + 30_000)
    assert (await counts(driver, "jobs.from_a_newer_deploy")) == {
        "done": 0,
        "retried": 0,
        "failed": 0,
        "dead": 0,
    }
    [logged] = records(caplog, "jobs.execute.unknown-job")
    assert logged.job == "jobs.from_a_newer_deploy"  # type: ignore[attr-defined]


async def test_a_shed_is_handed_back_after_about_one_poll() -> None:
    driver, clock = frozen_driver()
    job_id = (await driver.enqueue(EnqueueRequest(name="x", input={}, idempotency_key="k"))).id
    execution = await hand_back(await claim(driver), driver=driver, reason="shed")
    assert execution.resume_at_ms == clock.now_ms() + 1_000
    assert (await row(driver, job_id)).attempt == 0


# --- finalAttempt --------------------------------------------------------------------------


async def test_final_attempt_is_true_when_a_failure_is_not_retried_for_want_of_attempts() -> None:
    driver, clock = frozen_driver()
    seen: list[tuple[int, bool]] = []

    async def flaky(run: Run[Any]) -> None:
        seen.append((run.attempt, run.final_attempt))
        raise ValueError("again")

    handle = _declare(flaky, retry=Retry(attempts=3, jitter=False, backoff="fixed"))
    await enqueue(driver, handle)
    for _ in range(3):
        await attempt(driver, handle)
        clock.advance(1_000)
    assert seen == [(1, False), (2, False), (3, True)]


async def test_a_terminal_error_stops_an_attempt_that_was_not_final() -> None:
    driver, _ = frozen_driver()
    seen: list[bool] = []

    async def early(run: Run[Any]) -> None:
        seen.append(run.final_attempt)
        raise Terminal("stop")

    handle = _declare(early, retry=Retry(attempts=5))
    await enqueue(driver, handle)
    assert (await attempt(driver, handle)).outcome == "dead-lettered"
    assert seen == [False]


# --- the scope the body runs under ----------------------------------------------------------


async def test_the_body_acts_as_its_declared_tenant_with_the_rows_trace() -> None:
    driver, _ = frozen_driver()
    seen: dict[str, Any] = {}

    def context() -> dict[str, Any]:
        actor = current_actor()
        return {"actor": actor}

    async def scoped(run: Run[Any]) -> None:
        seen["ctx_org"] = run.ctx["actor"].org_id
        seen["ambient_org"] = current_actor().org_id  # type: ignore[union-attr]
        seen["actor_id"] = current_actor().id  # type: ignore[union-attr]
        seen["guard"] = require_tenant(ORG)
        seen["trace"] = current_traceparent()
        seen["tenant_id"] = run.tenant_id

    handle = job(
        input=t.object(org_id=t.uuid),
        idempotency_key=lambda i: i.org_id,
        tenant=lambda i: i.org_id,
        name="t.scoped",
        run=scoped,
    )
    trace = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    await driver.enqueue(
        EnqueueRequest(
            name=handle.name,
            input={"org_id": ORG},
            idempotency_key="k",
            tenant_id=ORG,
            traceparent=trace,
        )
    )
    execution = await attempt(driver, handle, context=context)
    assert execution.outcome == "completed"
    # The job's span is the enqueuer's child: same trace, its own span id.
    assert seen["trace"][:36] == trace[:36]
    assert seen["trace"][36:52] != trace[36:52]
    assert seen == {
        "ctx_org": ORG,
        "ambient_org": ORG,
        "actor_id": None,  # system authority: never the enqueuer
        "guard": ORG,
        "trace": seen["trace"],
        "tenant_id": ORG,
    }
    assert current_actor() is None  # nothing leaks out of the attempt


async def test_tenant_none_carries_no_org() -> None:
    driver, _ = frozen_driver()
    seen: list[Any] = []

    async def global_job(run: Run[Any]) -> None:
        seen.append(current_actor().org_id)  # type: ignore[union-attr]
        require_tenant()

    handle = _declare(global_job, retry=Retry(attempts=1))
    await enqueue(driver, handle)
    execution = await attempt(driver, handle)
    assert seen == [None]
    assert execution.outcome == "dead-lettered"  # X_TENANCY_ACTOR_ORG_REQUIRED: unclassified
    assert execution.code == "X_JOB_MAX_ATTEMPTS"  # the only attempt is spent
    assert isinstance(execution.error, JobMaxAttemptsError)
    assert isinstance(execution.error.__cause__, TenancyActorOrgRequiredError)


async def test_before_settle_runs_while_the_row_is_still_running() -> None:
    driver, _ = frozen_driver()
    states: list[str] = []

    async def quick(run: Run[Any]) -> None:
        return None

    handle = _declare(quick)
    job_id = await enqueue(driver, handle)

    async def before() -> None:
        states.append((await row(driver, job_id)).state)

    execution = await attempt(driver, handle, before_settle=before)
    assert states == ["running"]
    assert execution.outcome == "completed"
    assert (await row(driver, job_id)).state == "done"


# --- wait_for_event through the executor --------------------------------------------------


async def test_a_wait_suspends_uncounted_at_event_poll_and_resumes_on_the_event() -> None:
    driver, clock = frozen_driver()
    bus = memory_event_bus(clock=clock)

    async def awaits_approval(run: Run[Any]) -> Any:
        answer = await run.step.wait_for_event("approval", "doc.approved", match={"doc": "d1"})
        return answer["by"]

    handle = job(
        idempotency_key="k",
        tenant="none",
        name="t.awaits_approval",
        event_poll="10s",
        retry=Retry(attempts=1),
    )(awaits_approval)
    job_id = await enqueue(driver, handle)
    first = await attempt(driver, handle, events=bus)
    assert (first.outcome, first.resume_at_ms) == ("suspended", clock.now_ms() + 10_000)
    assert (await row(driver, job_id)).attempt == 0

    clock.advance(10_000)
    polled = await attempt(driver, handle, events=bus)  # nothing yet: park again
    assert polled.outcome == "suspended"

    await bus.publish("doc.approved", {"doc": "d1", "by": "ana"})
    clock.advance(10_000)
    done = await attempt(driver, handle, events=bus)
    assert (done.outcome, done.result, done.attempt) == ("completed", "ana", 1)


async def test_a_timed_out_wait_fails_the_attempt_with_x_job_timeout() -> None:
    driver, clock = frozen_driver()
    bus = memory_event_bus(clock=clock)

    async def awaits_reply(run: Run[Any]) -> None:
        await run.step.wait_for_event("reply", "reply", timeout="1m")

    handle = _declare(awaits_reply, retry=Retry(attempts=1))
    await enqueue(driver, handle)
    parked = await attempt(driver, handle, events=bus)
    assert parked.resume_at_ms == clock.now_ms() + 30_000  # the default event_poll
    clock.advance(45_000)
    again = await attempt(driver, handle, events=bus)
    assert again.resume_at_ms == clock.now_ms() + 15_000  # what is left of the timeout
    clock.advance(15_000)
    timed_out = await attempt(driver, handle, events=bus)
    assert (timed_out.outcome, timed_out.code) == ("dead-lettered", "X_JOB_MAX_ATTEMPTS")
    assert isinstance(timed_out.error, JobMaxAttemptsError)
    assert isinstance(timed_out.error.__cause__, JobTimeoutError)


async def test_a_body_that_swallows_its_suspension_is_still_suspended() -> None:
    driver, _ = frozen_driver()

    async def swallows(run: Run[Any]) -> str:
        try:
            await run.step.sleep("1m")
        except BaseException:
            pass
        return "carried on"

    handle = _declare(swallows)
    await enqueue(driver, handle)
    execution = await attempt(driver, handle)
    assert execution.outcome == "suspended"
    assert execution.result is None
