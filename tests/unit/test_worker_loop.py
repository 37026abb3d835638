"""The claim loop: the cap read before the claim, the room split, rotation, refills, backoff,
wakes and timers — on the memory driver."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from typing import Any

import pytest

from tests.support.worker import (
    ControlledDriver,
    Gate,
    declare,
    enqueue,
    frozen,
    make_worker,
    records,
    row,
    settled,
)
from ujobs.clock import SYSTEM_CLOCK
from ujobs.drivers.memory.driver import memory_driver
from ujobs.errors import InvariantError
from ujobs.execution.run import Run
from ujobs.wake.local import signal_enqueued
from ujobs.worker.claim_loop import ClaimAsk


class StandInWake:
    """A stand-in channel (the Redis/Postgres wake is the outside world here)."""

    def __init__(self, *, live: bool = False) -> None:
        self.callbacks: list[Callable[[str], None]] = []
        self._live = live

    def subscribe(self, callback: Callable[[str], None]) -> Callable[[], None]:
        self.callbacks.append(callback)
        return lambda: self.callbacks.remove(callback) if callback in self.callbacks else None

    @property
    def live(self) -> bool:
        return self._live

    def announce(self, queue: str) -> None:
        for callback in list(self.callbacks):
            callback(queue)


@pytest.mark.parametrize("bad", [0, -1, 1.5, math.nan, math.inf, True, "2"])
def test_max_in_flight_refuses_anything_but_a_whole_number(bad: Any) -> None:
    driver, _ = frozen()
    handle = declare(Gate())
    with pytest.raises(InvariantError) as info:
        make_worker(driver, [handle], max_in_flight=bad)
    assert info.value.code == "X_INVARIANT"
    assert info.value.meta["option"] == "max_in_flight"


def test_options_default_from_the_registry() -> None:
    driver, _ = frozen()
    a = declare(Gate(), name="a", queue="qa")
    b = declare(Gate(), name="b", queue="qb")
    worker = make_worker(driver, [a, b], concurrency={"qa": 3}, visibility_timeout_ms=9_000)
    opts = worker.options
    assert opts.queues == ("qa", "qb")
    assert dict(opts.concurrency) == {"qa": 3, "qb": 8}
    assert opts.heartbeat_interval_ms == 3_000
    assert worker.stats().max_in_flight is None
    assert worker.stats().capacity == 11
    with pytest.raises(InvariantError):
        make_worker(driver, [a], heartbeat_interval_ms=9_000, visibility_timeout_ms=9_000)


async def test_three_backlogged_queues_on_a_cap_of_one_run_in_turn() -> None:
    driver = memory_driver()
    order: list[str] = []

    async def body(run: Run[Any]) -> None:
        order.append(run.queue)

    handle = declare(body)
    for index, queue in enumerate(("a", "b", "c")):
        for n in range(2):
            await enqueue(driver, handle, index * 10 + n, queue=queue)
    worker = make_worker(driver, [handle], queues=["a", "b", "c"], max_in_flight=1)
    await worker.start()
    try:
        await settled(worker, 6)
    finally:
        await worker.stop()
    assert order == ["a", "b", "c", "a", "b", "c"]


async def test_a_worker_at_the_cap_asks_the_queue_for_nothing() -> None:
    driver, _ = frozen()
    gate = Gate()
    handle = declare(gate)
    ids = [await enqueue(driver, handle, n) for n in range(5)]
    worker = make_worker(driver, [handle], max_in_flight=2)
    first = await worker.run_once()
    assert first.asks == [ClaimAsk(("default",), 2, 2)]
    second = await worker.run_once()
    assert second.full
    assert second.asks == []
    assert [(await row(driver, i)).state for i in ids].count("running") == 2
    assert worker.stats().in_flight == 2
    gate.open.set()
    await worker.join()


async def test_the_room_is_split_ceil_room_over_queues_left_in_rotated_order() -> None:
    driver, _ = frozen()
    gate = Gate()
    handle = declare(gate)
    worker = make_worker(driver, [handle], queues=["a", "b", "c"], max_in_flight=6)
    gate.open.set()
    await enqueue(driver, handle, 0, queue="c")
    warm = await worker.run_once()  # from empty: one statement over every queue
    assert warm.asks == [ClaimAsk(("a", "b", "c"), 6, 1)]
    await worker.join()

    gate.open.clear()
    await enqueue(driver, handle, 1, queue="a")
    for n in range(10):
        await enqueue(driver, handle, 100 + n, queue="b")
        await enqueue(driver, handle, 200 + n, queue="c")
    split = await worker.run_once()
    # After c (the last queue given a job): a, b, c. a has less than its share of 2, so the
    # rest goes to the queues after it.
    assert split.asks == [ClaimAsk(("a",), 2, 1), ClaimAsk(("b",), 3, 3), ClaimAsk(("c",), 2, 2)]
    gate.open.set()
    await worker.join()


async def test_a_queue_that_filled_its_share_is_asked_again_while_room_is_left() -> None:
    driver, _ = frozen()
    gate = Gate()
    handle = declare(gate)
    worker = make_worker(driver, [handle], queues=["a", "b", "c"], max_in_flight=6)
    gate.open.set()
    await enqueue(driver, handle, 0, queue="c")
    await worker.run_once()
    await worker.join()
    gate.open.clear()
    for n in range(10):
        await enqueue(driver, handle, 100 + n, queue="b")
    await enqueue(driver, handle, 200, queue="c")
    result = await worker.run_once()
    assert result.asks == [
        ClaimAsk(("a",), 2, 0),
        ClaimAsk(("b",), 3, 3),
        ClaimAsk(("c",), 3, 1),
        ClaimAsk(("b",), 2, 2),
    ]
    gate.open.set()
    await worker.join()


async def test_an_idle_pass_is_one_claim_over_every_queue_with_a_free_slot() -> None:
    driver, _ = frozen()
    gate = Gate()
    handle = declare(gate)
    worker = make_worker(driver, [handle], queues=["a", "b", "c"], concurrency={"a": 1})
    assert (await worker.run_once()).asks == [ClaimAsk(("a", "b", "c"), 1, 0)]
    await enqueue(driver, handle, 1, queue="a")
    # Limited by the smallest free pool; a full answer with room left goes on queue by queue,
    # after a (the queue just given a job), whose one slot is now held.
    assert (await worker.run_once()).asks == [
        ClaimAsk(("a", "b", "c"), 1, 1),
        ClaimAsk(("b",), 8, 0),
        ClaimAsk(("c",), 8, 0),
    ]
    assert (await worker.run_once()).asks == [ClaimAsk(("b",), 8, 0), ClaimAsk(("c",), 8, 0)]
    # No work at all: back to one statement, without the queue whose pool is full.
    assert (await worker.run_once()).asks == [ClaimAsk(("b", "c"), 8, 0)]
    gate.open.set()
    await worker.join()


async def test_a_freed_slot_is_refilled_at_once_without_a_poll() -> None:
    driver = memory_driver()
    done: list[int] = []

    async def body(run: Run[Any]) -> None:
        done.append(run.input.n)

    handle = declare(body)
    for n in range(4):
        await enqueue(driver, handle, n)
    # One slot and a one-minute poll: only the finishing run's kick can claim the next row.
    worker = make_worker(driver, [handle], concurrency=1, poll_interval_ms=60_000)
    await worker.start()
    try:
        await settled(worker, 4)
    finally:
        await worker.stop()
    assert sorted(done) == [0, 1, 2, 3]


async def test_idle_passes_double_their_wait_up_to_the_ceiling() -> None:
    driver = memory_driver()
    handle = declare(Gate())
    worker = make_worker(driver, [handle], poll_interval_ms=5, idle_poll_max_ms=40)
    await worker.start()
    try:
        await worker.signals.wait("waiting", lambda _: len(worker.signals.emitted("waiting")) >= 5)
    finally:
        await worker.stop()
    assert worker.signals.emitted("waiting")[:5] == [5, 10, 20, 40, 40]


def test_the_idle_ceiling_is_2s_and_5s_only_while_the_wake_is_live() -> None:
    driver, _ = frozen()
    handle = declare(Gate())
    assert make_worker(driver, [handle]).idle_ceiling_ms() == 2_000
    assert make_worker(driver, [handle], wake=StandInWake(live=False)).idle_ceiling_ms() == 2_000
    assert make_worker(driver, [handle], wake=StandInWake(live=True)).idle_ceiling_ms() == 5_000
    declared = make_worker(driver, [handle], wake=StandInWake(live=True), idle_poll_max_ms=700)
    assert declared.idle_ceiling_ms() == 700


async def test_a_wake_naming_a_served_queue_passes_now_and_others_are_ignored() -> None:
    driver = memory_driver()
    ran: list[int] = []

    async def body(run: Run[Any]) -> None:
        ran.append(run.input.n)

    handle = declare(body)
    wake = StandInWake()
    worker = make_worker(driver, [handle], wake=wake, poll_interval_ms=60_000)
    await worker.start()
    try:
        await worker.signals.wait("waiting")  # the first pass found nothing; a minute's wait
        passes = worker.stats().passes
        wake.announce("elsewhere")
        assert worker.signals.emitted("wake") == [("elsewhere", False)]
        assert worker.stats().passes == passes
        await enqueue(driver, handle, 1)
        wake.announce("default")
        await settled(worker, 1)
        await enqueue(driver, handle, 2)
        signal_enqueued("default")  # an enqueue in this process wakes it with no channel
        await settled(worker, 2)
    finally:
        await worker.stop()
    assert ran == [1, 2]
    assert wake.callbacks == []  # stop() unsubscribed


async def test_a_wake_during_a_pass_asks_for_one_more_pass_behind_it() -> None:
    driver = ControlledDriver(SYSTEM_CLOCK)
    handle = declare(Gate())
    wake = StandInWake()
    worker = make_worker(driver, [handle], wake=wake, poll_interval_ms=60_000)
    await worker.start()
    try:
        await worker.signals.wait("waiting")
        before = worker.stats().passes
        driver.claim_gate = asyncio.Event()
        driver.claim_entered.clear()
        mark = worker.signals.mark()
        wake.announce("default")
        await driver.claim_entered.wait()
        for _ in range(3):
            wake.announce("default")
        driver.claim_gate.set()
        await worker.signals.wait("waiting", since=mark)
        assert worker.stats().passes == before + 2
    finally:
        await worker.stop()


async def test_a_row_handed_back_due_inside_a_minute_gets_a_timer() -> None:
    driver = memory_driver()
    runs: list[int] = []

    async def naps(run: Run[Any]) -> None:
        runs.append(run.attempt)
        await run.step.sleep("nap", 150)

    handle = declare(naps)
    job_id = await enqueue(driver, handle, 1)
    worker = make_worker(driver, [handle], poll_interval_ms=60_000)
    await worker.start()
    try:
        first = (await settled(worker, 1))[0]
        assert first.outcome == "suspended"
        second = (await settled(worker, 2))[1]
    finally:
        await worker.stop()
    assert second.outcome == "completed"
    assert (await row(driver, job_id)).state == "done"


async def test_a_row_due_past_a_minute_gets_no_timer() -> None:
    driver, _ = frozen()

    async def long_nap(run: Run[Any]) -> None:
        await run.step.sleep("nap", "2m")

    handle = declare(long_nap)
    await enqueue(driver, handle, 1)
    worker = make_worker(driver, [handle])
    await worker.run_once()
    await worker.join()
    assert worker.stats().next_timer_ms is None

    async def short_nap(run: Run[Any]) -> None:
        await run.step.sleep("nap", "30s")

    short = declare(short_nap, name="short")
    await enqueue(driver, short, 2)
    worker = make_worker(driver, [short])
    await worker.run_once()
    await worker.join()
    assert worker.stats().next_timer_ms == driver.clock.now_ms() + 30_000


async def test_a_queue_no_registered_job_names_is_polled_and_reported_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    driver = memory_driver()
    handle = declare(Gate())
    worker = make_worker(driver, [handle], queues=["default", "adhoc"])
    await worker.start()
    await worker.start()
    try:
        assert worker.signals.emitted("queue-unregistered") == ["adhoc"]
        logged = records(caplog, "jobs.worker.queue-unregistered")
        assert [r.__dict__["queue"] for r in logged] == ["adhoc"]
        await worker.signals.wait("pass")
        assert worker.signals.emitted("pass")[0].asks[0].queues == ("default", "adhoc")
    finally:
        await worker.stop()


async def test_the_registry_row_says_what_the_worker_holds() -> None:
    driver, clock = frozen()
    gate = Gate()
    handle = declare(gate)
    job_id = await enqueue(driver, handle, 1)
    worker = make_worker(driver, [handle], max_in_flight=3)
    await worker.start()
    try:
        await gate.entered.wait()
        await worker.heartbeat_once()  # nothing due yet on the frozen clock
        clock.advance(worker.options.heartbeat_interval_ms)
        await worker.heartbeat_once()
        introspect = driver.introspect
        assert introspect is not None
        (mine,) = await introspect.workers()
        assert (mine.id, mine.slots, mine.in_flight) == (worker.id, 3, (job_id,))
        assert mine.draining_at_ms is None
    finally:
        gate.open.set()
        await worker.stop()
    assert await introspect.workers() == []


async def test_a_paused_queue_is_read_by_the_claim_itself() -> None:
    driver, _ = frozen()
    gate = Gate()
    gate.open.set()
    handle = declare(gate)
    job_id = await enqueue(driver, handle, 1)
    introspect = driver.introspect
    assert introspect is not None
    await introspect.pause_queue("default")
    worker = make_worker(driver, [handle])
    assert (await worker.run_once()).claimed == 0
    await introspect.resume_queue("default")
    assert (await worker.run_once()).claimed == 1
    await worker.join()
    assert (await row(driver, job_id)).state == "done"
