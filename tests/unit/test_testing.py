"""``ujobs.testing``: a user's test runs a job to its end in-process on the memory driver,
with sleeps and retry waits passed on a frozen clock, and reads what is still enqueued."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from ujobs import Retry, Run, define_api, job, t
from ujobs.clock import FrozenClock
from ujobs.drivers.memory.driver import memory_driver
from ujobs.errors import InvariantError, JobUnknownError
from ujobs.jobs.enqueue_target import set_job_driver
from ujobs.jobs.job import JobHandle
from ujobs.testing import (
    DEFAULT_START_MS,
    drain,
    enqueued,
    install_memory_driver,
    uninstall_memory_driver,
)

DAY_MS = 86_400_000


def declare(name: str, body: Any, **kw: Any) -> JobHandle[Any]:
    handle = job(
        name=name,
        run=body,
        input=t.object(n=t.number.int()),
        idempotency_key=lambda i: f"{name}:{i.n}",
        tenant="none",
        **kw,
    )
    assert isinstance(handle, JobHandle)
    return handle


async def test_a_job_that_sleeps_three_days_runs_to_its_end_in_one_drain() -> None:
    steps: list[str] = []

    def record(name: str) -> str:
        steps.append(name)
        return name

    async def body(run: Run[Any]) -> int:
        await run.step.run("first", lambda signal: record("a"))
        await run.step.sleep("3d")
        await run.step.run("second", lambda signal: record("b"))
        return int(run.input.n) * 2

    napper = declare("napper", body)
    driver = install_memory_driver()
    await napper.enqueue({"n": 21})

    drained = await drain(napper)

    assert drained.outcomes() == {"suspended": 1, "completed": 1}
    assert drained.results(napper) == [42]
    assert steps == ["a", "b"]  # the first step replayed from storage, not run again
    assert driver.clock.now_ms() == DEFAULT_START_MS + 3 * DAY_MS
    assert enqueued(napper) == []


async def test_without_advancing_the_clock_a_sleeping_run_stays_enqueued() -> None:
    async def body(run: Run[Any]) -> None:
        await run.step.sleep("nap", "1h")

    napper = declare("napper", body)
    driver = install_memory_driver()
    await napper.enqueue({"n": 1})

    drained = await drain(napper, advance_clock=False)

    assert drained.outcomes() == {"suspended": 1}
    waiting = enqueued(napper)
    assert [(row.state, row.run_at_ms) for row in waiting] == [
        ("suspended", DEFAULT_START_MS + 3_600_000)
    ]
    assert driver.clock.now_ms() == DEFAULT_START_MS


async def test_a_failing_job_retries_through_its_backoff_until_dead() -> None:
    async def body(run: Run[Any]) -> None:
        raise RuntimeError(f"attempt {run.attempt} failed")

    flaky = declare("flaky", body, retry=Retry(attempts=3, delay="1m"))
    driver = install_memory_driver()
    queued = await flaky.enqueue({"n": 1})

    drained = await drain(flaky)

    assert [e.outcome for e in drained.executions] == ["retried", "retried", "dead-lettered"]
    introspect = driver.introspect
    assert introspect is not None
    row = await introspect.get(queued.id)
    assert row is not None
    assert (row.state, row.attempt) == ("dead", 3)
    assert driver.clock.now_ms() > DEFAULT_START_MS + 60_000  # the backoff was waited out


async def test_enqueued_lists_the_jobs_rows_oldest_first_and_only_that_jobs() -> None:
    async def body(run: Run[Any]) -> None:
        return None

    mailer = declare("mailer", body)
    other = declare("other", body)
    install_memory_driver()
    await mailer.enqueue({"n": 1})
    await other.enqueue({"n": 1})
    await mailer.enqueue({"n": 2})

    assert [row.input for row in enqueued(mailer)] == [{"n": 1}, {"n": 2}]
    assert [row.input for row in enqueued(other)] == [{"n": 1}]


async def test_rows_are_run_by_the_registered_handle_when_none_is_passed() -> None:
    ran: list[int] = []

    async def body(run: Run[Any]) -> None:
        ran.append(int(run.input.n))

    greet = declare("greet", body)
    define_api(jobs=[SimpleNamespace(greet=greet)])
    install_memory_driver()
    await greet.enqueue({"n": 7})

    assert (await drain()).outcomes() == {"completed": 1}
    assert ran == [7]


async def test_a_row_no_handle_names_is_x_job_unknown() -> None:
    async def body(run: Run[Any]) -> None:
        return None

    stray = declare("stray", body)
    install_memory_driver()
    await stray.enqueue({"n": 1})

    with pytest.raises(JobUnknownError, match="stray") as caught:
        await drain(queues=["default"])
    assert caught.value.code == "X_JOB_UNKNOWN"


async def test_a_wait_nobody_answers_stops_at_max_attempts() -> None:
    async def body(run: Run[Any]) -> None:
        await run.step.wait_for_event("approval", "doc.approved")

    waiter = declare("waiter", body)
    install_memory_driver()
    await waiter.enqueue({"n": 1})

    with pytest.raises(InvariantError, match="5 attempts"):
        await drain(waiter, max_attempts=5)


async def test_the_helpers_refuse_a_driver_that_is_not_the_memory_one() -> None:
    async def body(run: Run[Any]) -> None:
        return None

    handle = declare("x", body)
    with pytest.raises(InvariantError, match="install_memory_driver"):
        enqueued(handle)
    set_job_driver(object())  # type: ignore[arg-type]  # a stand-in for another backend
    with pytest.raises(InvariantError, match="install_memory_driver"):
        await drain(handle)
    uninstall_memory_driver()


async def test_a_driver_passed_in_is_used_instead_of_the_installed_one() -> None:
    async def body(run: Run[Any]) -> None:
        return None

    handle = declare("x", body)
    driver = memory_driver(clock=FrozenClock(DEFAULT_START_MS))
    await driver.enqueue(handle.request({"n": 1}, clock=driver.clock))

    assert len(enqueued(handle, driver=driver)) == 1
    assert (await drain(handle, driver=driver)).outcomes() == {"completed": 1}
