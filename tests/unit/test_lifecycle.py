"""Two-phase shutdown: every accept, then the in-flight work, then every close, one deadline."""

from __future__ import annotations

import asyncio
import logging
import os
import signal

import pytest

from ujobs.errors import ConfigInvalidError
from ujobs.lifecycle import (
    DEFAULT_DRAIN_DEADLINE_MS,
    Deadline,
    Lifecycle,
    configure_lifecycle,
    drain,
    process_lifecycle,
    register_shutdown_hooks,
    reset_lifecycle,
)


@pytest.fixture(autouse=True)
def _fresh_process_lifecycle() -> None:
    reset_lifecycle()


async def test_every_accept_runs_before_any_close() -> None:
    lifecycle = Lifecycle()
    order: list[str] = []

    async def close(name: str, deadline: Deadline) -> None:
        order.append(f"close:{name}")

    for name in ("worker", "scheduler"):
        lifecycle.register(
            accept=lambda name=name: order.append(f"accept:{name}"),  # type: ignore[misc]
            close=lambda deadline, name=name: close(name, deadline),  # type: ignore[misc]
            name=name,
        )
    await lifecycle.drain()
    assert order[:2] == ["accept:worker", "accept:scheduler"]
    assert sorted(order[2:]) == ["close:scheduler", "close:worker"]


async def test_a_slow_close_does_not_hold_back_another_roles_accept() -> None:
    lifecycle = Lifecycle(deadline_ms=5_000)
    accepted = asyncio.Event()
    release = asyncio.Event()

    async def slow_close(deadline: Deadline) -> None:
        await release.wait()

    lifecycle.register(close=slow_close, name="slow")
    lifecycle.register(accept=accepted.set, name="other")
    draining = asyncio.ensure_future(lifecycle.drain())
    await asyncio.wait_for(accepted.wait(), 5)
    assert not draining.done()
    release.set()
    await asyncio.wait_for(draining, 5)


async def test_close_hooks_are_told_the_deadline_and_run_together() -> None:
    lifecycle = Lifecycle(deadline_ms=2_000)
    seen: list[float] = []
    both_in = asyncio.Barrier(2)

    async def close(deadline: Deadline) -> None:
        seen.append(deadline.remaining_s())
        await asyncio.wait_for(both_in.wait(), 5)  # deadlocks if closes ran one at a time

    lifecycle.register(close=close)
    lifecycle.register(close=close)
    await lifecycle.drain()
    assert len(seen) == 2
    assert all(0 < s <= 2.0 for s in seen)


async def test_drain_waits_for_counted_work_between_the_phases() -> None:
    lifecycle = Lifecycle(deadline_ms=5_000)
    order: list[str] = []
    finish = asyncio.Event()
    started = asyncio.Event()

    async def work() -> None:
        async with lifecycle.begin_work():
            started.set()
            await finish.wait()
            order.append("work-done")

    async def close(deadline: Deadline) -> None:
        order.append("close")

    lifecycle.register(accept=lambda: order.append("accept"), close=close)
    running = asyncio.ensure_future(work())
    await started.wait()
    draining = asyncio.ensure_future(lifecycle.drain())
    await asyncio.sleep(0)
    assert lifecycle.in_flight == 1
    finish.set()
    await asyncio.wait_for(draining, 5)
    await running
    assert order == ["accept", "work-done", "close"]


async def test_in_flight_work_past_the_deadline_is_abandoned_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    lifecycle = Lifecycle(deadline_ms=50)
    closed = asyncio.Event()

    async def close(deadline: Deadline) -> None:
        closed.set()

    lifecycle.register(close=close)
    never = asyncio.Event()

    async def stuck() -> None:
        async with lifecycle.begin_work():
            await never.wait()

    task = asyncio.ensure_future(stuck())
    await asyncio.sleep(0)
    with caplog.at_level(logging.WARNING, logger="ujobs.lifecycle"):
        await asyncio.wait_for(lifecycle.drain(), 5)
    assert closed.is_set()
    assert any(r.msg == "jobs.lifecycle.in-flight-abandoned" for r in caplog.records)
    task.cancel()


async def test_a_close_that_ignores_the_deadline_is_cancelled_after_the_grace(
    caplog: pytest.LogCaptureFixture,
) -> None:
    lifecycle = Lifecycle(deadline_ms=10)
    cancelled = asyncio.Event()

    async def stubborn(deadline: Deadline) -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    lifecycle.register(close=stubborn, name="stubborn")
    with caplog.at_level(logging.ERROR, logger="ujobs.lifecycle"):
        await asyncio.wait_for(lifecycle.drain(), 5)
    assert cancelled.is_set()
    (record,) = [r for r in caplog.records if r.msg == "jobs.lifecycle.close-abandoned"]
    assert record.hook == "stubborn"  # type: ignore[attr-defined]


async def test_a_failing_hook_does_not_stop_the_others(caplog: pytest.LogCaptureFixture) -> None:
    lifecycle = Lifecycle()
    ran: list[str] = []

    def bad_accept() -> None:
        raise RuntimeError("boom")

    async def bad_close(deadline: Deadline) -> None:
        raise RuntimeError("boom")

    async def good_close(deadline: Deadline) -> None:
        ran.append("close")

    lifecycle.register(accept=bad_accept, close=bad_close)
    lifecycle.register(accept=lambda: ran.append("accept"), close=good_close)
    with caplog.at_level(logging.ERROR, logger="ujobs.lifecycle"):
        await lifecycle.drain()
    assert ran == ["accept", "close"]
    messages = {r.msg for r in caplog.records}
    assert {"jobs.lifecycle.accept-failed", "jobs.lifecycle.close-failed"} <= messages


async def test_a_second_drain_joins_the_first_and_unregister_removes_hooks() -> None:
    lifecycle = Lifecycle()
    calls: list[str] = []
    unregister = lifecycle.register(accept=lambda: calls.append("gone"))
    lifecycle.register(accept=lambda: calls.append("kept"))
    unregister()
    unregister()  # safe twice
    await asyncio.gather(lifecycle.drain(), lifecycle.drain())
    await lifecycle.drain()
    assert calls == ["kept"]
    assert lifecycle.draining


async def test_process_functions_use_the_configured_deadline() -> None:
    assert process_lifecycle().deadline_ms == DEFAULT_DRAIN_DEADLINE_MS
    configure_lifecycle(deadline_ms=1_234)
    seen: list[float] = []

    async def close(deadline: Deadline) -> None:
        seen.append(deadline.remaining_s())

    register_shutdown_hooks(close=close)
    await drain()
    assert 0 < seen[0] <= 1.234
    with pytest.raises(ConfigInvalidError):
        configure_lifecycle(deadline_ms=-1)


async def test_sigterm_on_the_running_loop_drains() -> None:
    lifecycle = Lifecycle()
    accepted = asyncio.Event()
    lifecycle.register(accept=accepted.set)
    remove = lifecycle.handle_signals((signal.SIGUSR1,))
    try:
        os.kill(os.getpid(), signal.SIGUSR1)
        await asyncio.wait_for(lifecycle.wait_drained(), 5)
        assert accepted.is_set()
    finally:
        remove()
