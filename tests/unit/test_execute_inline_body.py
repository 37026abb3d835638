"""The body runs inside its run's task (``ujobs.execution.inline_body``): no task per body, and
asyncio seen from the body as from a task's own body — ``current_task()``, ``asyncio.timeout``,
the cancel of what it waits on, its context — with a task of its own only when it must outlive
its run (abandoned after a halt, or its run cancelled from outside while it swallows that)."""

from __future__ import annotations

import asyncio
import contextvars
import gc
from typing import Any

import pytest

from tests.support.execute import attempt, claim, enqueue, frozen_driver, records
from ujobs.execution.attempt import execute_job
from ujobs.execution.inline_body import DETACHED, Inline
from ujobs.execution.outcome import JobExecution
from ujobs.execution.run import Run
from ujobs.jobs.job import job
from ujobs.jobs.retry import Retry

SEEN: contextvars.ContextVar[str] = contextvars.ContextVar("seen", default="unset")


def _declare(body: Any, *, timeout: str | None = None) -> Any:
    return job(
        idempotency_key="k",
        tenant="none",
        name=f"inline.{body.__name__}",
        timeout=timeout,
        retry=Retry(attempts=3, jitter=False),
    )(body)


async def _until(predicate: Any, timeout_s: float = 5.0) -> None:
    async with asyncio.timeout(timeout_s):
        while not predicate():
            await asyncio.sleep(0.005)


async def test_a_body_that_never_waits_costs_no_task(monkeypatch: pytest.MonkeyPatch) -> None:
    driver, _ = frozen_driver()

    async def quick(run: Run[Any]) -> dict[str, int]:
        return {"n": 1}

    handle = _declare(quick)
    await enqueue(driver, handle)
    claimed = await claim(driver)
    loop = asyncio.get_running_loop()
    created: list[Any] = []
    real = loop.create_task

    def counting(coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
        created.append(coro)
        return real(coro, **kwargs)

    monkeypatch.setattr(loop, "create_task", counting)
    execution = await execute_job(claimed, driver=driver, handle=handle, context=None)
    assert (execution.outcome, execution.result) == ("completed", {"n": 1})
    assert created == []


async def test_the_body_sees_its_runs_task_and_asyncio_timeout_works_inside_it() -> None:
    driver, _ = frozen_driver()
    outer: list[asyncio.Task[Any] | None] = []

    async def timed(run: Run[Any]) -> str:
        inner = asyncio.current_task()
        try:
            async with asyncio.timeout(0.01):
                await asyncio.Event().wait()
        except TimeoutError:
            assert inner is not None
            assert inner.cancelling() == 0  # the timeout took its own cancel back
            return "timed out inside"
        return "never"

    handle = _declare(timed)
    await enqueue(driver, handle)
    claimed = await claim(driver)

    async def run() -> Any:
        outer.append(asyncio.current_task())
        return await execute_job(claimed, driver=driver, handle=handle, context=None)

    execution = await asyncio.create_task(run())
    assert (execution.outcome, execution.result) == ("completed", "timed out inside")


async def test_a_halt_cancels_the_future_the_body_waits_on() -> None:
    driver, _ = frozen_driver()
    waited: list[asyncio.Future[None]] = []

    async def waits(run: Run[Any]) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waited.append(future)
        await future

    handle = _declare(waits, timeout="20ms")
    await enqueue(driver, handle)
    execution = await attempt(driver, handle)
    assert (execution.outcome, execution.code) == ("retried", "X_JOB_TIMEOUT")
    assert waited[0].cancelled()
    current = asyncio.current_task()
    assert current is not None
    assert current.cancelling() == 0


async def test_an_abandoned_body_goes_on_in_its_own_task_with_its_context(
    caplog: pytest.LogCaptureFixture,
) -> None:
    driver, _ = frozen_driver()
    release = asyncio.Event()
    after: list[str] = []

    async def stubborn(run: Run[Any]) -> None:
        SEEN.set("set by the body")
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await release.wait()  # swallows the halt's cancel
        after.append(SEEN.get())

    handle = _declare(stubborn, timeout="20ms")
    await enqueue(driver, handle)
    execution = await attempt(driver, handle, abandon_grace_ms=10)
    assert execution.abandoned is True
    assert after == []
    release.set()
    await _until(lambda: after)
    assert after == ["set by the body"]
    await _until(lambda: records(caplog, "jobs.timeout.abandoned"))


async def test_a_run_cancelled_from_outside_ends_at_once_though_its_body_swallows_it() -> None:
    driver, _ = frozen_driver()
    started = asyncio.Event()
    release = asyncio.Event()
    ended: list[str] = []

    async def stubborn(run: Run[Any]) -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await release.wait()
        ended.append("body ended later, on its own")

    handle = _declare(stubborn)
    await enqueue(driver, handle)
    claimed = await claim(driver)
    running = asyncio.create_task(execute_job(claimed, driver=driver, handle=handle, context=None))
    await started.wait()
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    assert ended == []
    release.set()
    await _until(lambda: ended)


async def test_inline_answers_the_result_an_error_or_detached() -> None:
    async def value() -> int:
        await asyncio.sleep(0)
        return 7

    async def broken() -> None:
        await asyncio.sleep(0)
        raise ValueError("no")

    assert await Inline(value()) == 7
    with pytest.raises(ValueError, match="no"):
        await Inline(broken())

    gate = asyncio.Event()

    async def slow() -> str:
        await gate.wait()
        return "late"

    body = Inline(slow())
    awaiting = asyncio.ensure_future(_await(body))
    await asyncio.sleep(0.01)
    body.detach()
    assert await awaiting is DETACHED
    assert body.detached is not None
    gate.set()
    assert await body.detached == "late"


async def _await(body: Inline) -> Any:
    return await body


async def test_closing_the_inline_driver_closes_the_body() -> None:
    """As ``yield from`` does: the body's ``finally`` runs when its driver is closed."""
    cleaned: list[str] = []

    async def body() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            cleaned.append("finally")

    driver = Inline(body()).__await__()
    future = driver.send(None)
    assert asyncio.isfuture(future)
    driver.close()
    assert cleaned == ["finally"]


async def test_an_attempt_leaves_no_reference_cycle_behind() -> None:
    """Freed by reference counting when it ends: a cycle per job would wait for the cyclic
    collector (and keep the job's handle, and its name, declared until then)."""
    driver, _ = frozen_driver()

    async def waits_once(run: Run[Any]) -> int:
        await asyncio.sleep(0)
        return 1

    handle = _declare(waits_once)
    await enqueue(driver, handle)
    await attempt(driver, handle)  # warm: first-use caches are not garbage
    gc.collect()
    gc.disable()
    try:
        for _ in range(2):
            await enqueue(driver, handle)  # the last run is done: its key is free again
            execution = await attempt(driver, handle)
            assert execution.outcome == "completed"
        del execution
        assert gc.collect() == 0
    finally:
        gc.enable()


async def test_an_async_body_is_driven_as_its_own_coroutine() -> None:
    """``JobHandle.start`` hands ``execute_job`` the body's own coroutine: no frame of the
    handle's between the run's task and the body."""

    async def own(run: Run[Any]) -> str:
        return "ran"

    handle = _declare(own)
    coro = handle.start(object())
    try:
        assert coro.cr_code is own.__code__
    finally:
        coro.close()


async def _run_factory_made(body: Any, name: str) -> JobExecution:
    """One attempt of a ``job(run=body)`` job (three attempts, no jitter) on a frozen driver."""
    driver, _ = frozen_driver()
    handle = job(
        run=body,
        name=name,
        idempotency_key="k",
        tenant="none",
        retry=Retry(attempts=3, jitter=False),
    )
    await enqueue(driver, handle)
    return await execute_job(await claim(driver), driver=driver, handle=handle, context=None)


async def test_a_factory_body_that_answers_no_awaitable_fails_its_attempt() -> None:
    """A ``job(run=...)`` body that is not an ``async def`` still goes through the check:
    answering something that cannot be awaited fails the attempt with the declaration's code,
    which no retry can fix (the worker's run never crashes)."""
    not_async: Any = lambda run: "not awaitable"  # noqa: E731 - a factory-made body, on purpose
    execution = await _run_factory_made(not_async, "inline.factory_sync")
    assert execution.outcome == "dead-lettered"
    assert execution.error is not None
    assert getattr(execution.error, "code", None) == "X_JOB_DECLARATION_INVALID"


async def test_a_factory_body_that_answers_an_awaitable_completes() -> None:
    async def later(value: str) -> str:
        return value

    execution = await _run_factory_made(
        lambda run: later("from an awaitable"), "inline.factory_awaitable"
    )
    assert (execution.outcome, execution.result) == ("completed", "from an awaitable")


async def test_an_async_body_that_does_not_take_the_run_fails_its_attempt() -> None:
    """Calling an ``async def`` with the wrong arguments raises before any of its code runs;
    that is the attempt's failure like any other, never the worker's."""

    async def no_run() -> None:
        return None

    execution = await _run_factory_made(no_run, "inline.no_run")
    assert execution.outcome == "retried"
    assert isinstance(execution.error, TypeError)
