"""``raise Snooze(seconds)`` / ``run.snooze(seconds)``: back to ``ready`` at now + seconds
without spending an attempt, no error recorded, steps kept; its own log line; bounded, then
``X_JOB_SNOOZE_LIMIT`` dead-letters the run."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests.support.execute import attempt, enqueue, frozen_driver, last_error, records, row
from ujobs import Run, Snooze, job, t
from ujobs.errors import InvariantError
from ujobs.jobs.retry import Retry
from ujobs.jobs.snooze import MAX_SNOOZES


def _partner_job(name: str) -> Any:
    calls: list[int] = []

    @job(
        name=name,
        input=t.object(order=t.string),
        idempotency_key=lambda i: f"{name}:{i.order}",
        tenant="none",
        retry=Retry(attempts=3),
    )
    async def ask_partner(run: Run[Any]) -> str:
        await run.step.run("fetch", lambda _: {"order": run.input.order})
        calls.append(run.attempt)
        if len(calls) < 3:
            run.snooze(timedelta(minutes=5) if len(calls) == 1 else 30)
        return "ready"

    return ask_partner, calls


async def test_a_snooze_runs_again_later_uncounted_with_no_error_and_its_steps_kept(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level("INFO", logger="ujobs.jobs")
    handle, calls = _partner_job("snooze_partner")
    driver, clock = frozen_driver()
    job_id = await enqueue(driver, handle, {"order": "o-1"})

    first = await attempt(driver, handle)
    assert (first.outcome, first.settled, first.attempt_counted) == ("snoozed", True, False)
    assert first.resume_at_ms == clock.now_ms() + 300_000
    snoozed = await row(driver, job_id)
    assert (snoozed.state, snoozed.attempt, snoozed.last_error) == ("ready", 0, None)
    assert snoozed.run_at_ms == clock.now_ms() + 300_000
    [line] = records(caplog, "jobs.attempt.snoozed")
    assert (line.snoozes, line.retry_in_ms) == (1, 300_000)  # type: ignore[attr-defined]

    clock.advance(300_000)
    second = await attempt(driver, handle)
    assert (second.outcome, second.resume_at_ms) == ("snoozed", clock.now_ms() + 30_000)
    clock.advance(30_000)
    third = await attempt(driver, handle)
    assert (third.outcome, third.result) == ("completed", "ready")
    # Every snoozed attempt was presented as attempt 1: none was spent.
    assert calls == [1, 1, 1]
    done = await row(driver, job_id)
    assert (done.state, done.attempt, done.last_error) == ("done", 1, None)


async def test_a_run_past_the_snooze_cap_dead_letters_with_x_job_snooze_limit() -> None:
    @job(name="snooze_forever", input=t.object(), idempotency_key=lambda i: "k", tenant="none")
    async def snooze_forever(run: Run[Any]) -> None:
        raise Snooze(0)

    driver, _clock = frozen_driver()
    job_id = await enqueue(driver, snooze_forever, {})
    for _ in range(MAX_SNOOZES):
        assert (await attempt(driver, snooze_forever)).outcome == "snoozed"
    last = await attempt(driver, snooze_forever)
    assert (last.outcome, last.code, last.stop_reason) == (
        "dead-lettered",
        "X_JOB_SNOOZE_LIMIT",
        "terminal",
    )
    assert (await row(driver, job_id)).state == "dead"
    assert "X_JOB_SNOOZE_LIMIT" in await last_error(driver, job_id)


async def test_a_requeued_run_may_snooze_again() -> None:
    @job(name="snooze_requeue", input=t.object(), idempotency_key=lambda i: "k", tenant="none")
    async def snooze_requeue(run: Run[Any]) -> None:
        raise Snooze(0)

    driver, _clock = frozen_driver()
    job_id = await enqueue(driver, snooze_requeue, {})
    for _ in range(MAX_SNOOZES + 1):
        await attempt(driver, snooze_requeue)
    assert driver.introspect is not None
    await driver.introspect.requeue(job_id)
    assert (await attempt(driver, snooze_requeue)).outcome == "snoozed"


@pytest.mark.parametrize("seconds", [-1, 31 * 24 * 3600])
def test_a_snooze_out_of_range_is_a_bug_in_the_body(seconds: int) -> None:
    with pytest.raises(InvariantError):
        Snooze(seconds)
