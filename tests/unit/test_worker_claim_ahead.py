"""Claim-ahead (``ujobs.worker.claim_ahead``): rows claimed beyond the free slots wait in the
worker and lose nothing — each runs once, a row that goes back (the drain, a long wait) goes
back uncounted, and a worker that dies with rows held costs them no attempt."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

import ujobs.worker.claim_ahead as prefetch_module
from tests.support.worker import (
    Gate,
    declare,
    enqueue,
    frozen,
    make_worker,
    records,
    row,
    settled,
)
from ujobs.drivers.base import ClaimRef
from ujobs.drivers.memory import MemoryDriver, memory_driver
from ujobs.errors import InvariantError
from ujobs.execution.run import Run
from ujobs.worker.claimed_run import START_MARK_DELAY_MS


async def test_rows_claimed_ahead_run_once_each_in_order_and_count_one_attempt() -> None:
    driver = memory_driver()
    ran: list[int] = []

    async def body(run: Run[Any]) -> None:
        ran.append(run.input.n)

    handle = declare(body)
    ids = [await enqueue(driver, handle, n) for n in range(40)]
    worker = make_worker(driver, [handle], concurrency=4, claim_ahead=4)
    await worker.start()
    try:
        first = await worker.signals.wait("pass", lambda p: p.claimed > 0)
        assert first.asks[0].limit == 8  # four free slots plus four ahead
        await settled(worker, 40)
    finally:
        await worker.stop()
    assert sorted(ran) == list(range(40))
    assert len(ran) == 40
    for job_id in ids:
        r = await row(driver, job_id)
        assert (r.state, r.attempt) == ("done", 1)
    assert worker.prefetch.returned == 0


class StartsSeen(MemoryDriver):
    """The memory driver, remembering each ``start_ahead`` (and failing them when told)."""

    def __init__(self) -> None:
        super().__init__()
        self.starts: list[str] = []
        self.start_error: Exception | None = None

    async def start_ahead(self, job_id: str, ref: ClaimRef) -> bool:
        self.starts.append(job_id)
        if self.start_error is not None:
            raise self.start_error
        return await super().start_ahead(job_id, ref)


async def _until(check: Any) -> None:
    for _ in range(400):
        if check():
            return
        await asyncio.sleep(0.005)
    raise AssertionError("never")


async def test_a_row_claimed_ahead_is_marked_started_once_its_body_runs_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Marked START_MARK_DELAY_MS after its body began, if it still runs: a row that went
    straight to a slot never is, nor is one whose body ended sooner; a mark that fails is
    logged and stops nothing."""
    driver = StartsSeen()
    release = {n: asyncio.Event() for n in range(5)}
    started: list[int] = []

    async def body(run: Run[Any]) -> None:
        started.append(run.input.n)
        if run.input.n != 2:  # 2 ends at once
            await release[run.input.n].wait()

    handle = declare(body)
    ids = [await enqueue(driver, handle, n) for n in range(5)]
    worker = make_worker(driver, [handle], concurrency=2, claim_ahead=3)
    await worker.start()
    try:
        await _until(lambda: started == [0, 1])
        release[0].set()  # 2 starts from the buffer, ends at once; 3 starts and runs on
        await _until(lambda: started == [0, 1, 2, 3])
        await _until(lambda: driver.starts == [ids[3]])
        driver.start_error = ConnectionError("the store went away")
        release[1].set()  # 4 starts from the buffer; its mark fails
        await _until(lambda: records(caplog, "jobs.worker.start-failed"))
        for event in release.values():
            event.set()
        await settled(worker, 5)
    finally:
        await worker.stop()
    assert driver.starts == [ids[3], ids[4]]
    for job_id in ids:
        assert (await row(driver, job_id)).state == "done"


async def test_a_body_that_ends_in_its_first_step_is_never_marked_however_busy_the_loop() -> None:
    """The mark's delay counts from the body's first step: rows claimed ahead whose bodies end
    at once are not marked even when each body holds the loop past ``START_MARK_DELAY_MS``
    (a busy worker's loop), so a drain of short jobs sends no ``start_ahead`` at all."""
    driver = StartsSeen()

    async def body(run: Run[Any]) -> None:
        time.sleep(2 * START_MARK_DELAY_MS / 1000)  # noqa: ASYNC251 - holds the loop on purpose

    handle = declare(body)
    for n in range(6):
        await enqueue(driver, handle, n)
    worker = make_worker(driver, [handle], concurrency=1, claim_ahead=3)
    await worker.start()
    try:
        await settled(worker, 6)
    finally:
        await worker.stop()
    assert worker.prefetch.returned == 0
    assert driver.starts == []


async def test_claim_ahead_beyond_the_slots_is_honoured_up_to_sixteen_rows_per_slot() -> None:
    driver = memory_driver()
    handle = declare(lambda run: None)
    for n in range(60):
        await enqueue(driver, handle, n)
    three = make_worker(driver, [handle], concurrency=2, claim_ahead=6)
    assert three.prefetch.limit == 6
    await three.start()
    try:
        first = await three.signals.wait("pass", lambda p: p.claimed > 0)
        assert first.asks[0].limit == 8  # two free slots plus six ahead
        await settled(three, 60)
    finally:
        await three.stop()
    capped = make_worker(driver, [handle], concurrency=2, claim_ahead=100)
    assert (capped.prefetch.limit, capped.prefetch.floor) == (32, 6)  # 16 and 3 per slot


class Clock:
    """``time.monotonic`` as the prefetch reads it, moved by hand."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def _paced(
    monkeypatch: pytest.MonkeyPatch, *, limit: int, floor: int
) -> tuple[prefetch_module.Prefetch, Clock, list[int]]:
    clock, started = Clock(), [0]
    monkeypatch.setattr(time, "monotonic", clock)  # what the prefetch reads
    buffer = prefetch_module.Prefetch(
        driver=memory_driver(),
        limit=limit,
        floor=floor,
        started=lambda: started[0],
        visibility_ms=30_000,
        start=lambda claimed, sent_ms: None,
        can_start=lambda queue: False,
    )
    return buffer, clock, started


def test_the_buffer_holds_about_fifty_ms_of_the_workers_pace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At 2,000 runs a second the buffer makes room for 100 rows (50 ms of them); at 10,000 a
    second it stops at ``claim_ahead``; at 20 a second it keeps its floor (three a slot)."""
    buffer, clock, started = _paced(monkeypatch, limit=256, floor=48)
    assert buffer.room() == 48  # no pace read yet: the floor
    clock.now += 0.2
    started[0] += 400  # 2,000 a second
    assert buffer.room() == 100
    clock.now += 0.1
    started[0] += 1_000  # 10,000 a second: 500 rows of pace, 256 at most
    assert buffer.room() == 256
    clock.now += 0.5
    started[0] += 10  # 20 a second
    assert buffer.room() == 48


def test_the_pace_is_reread_only_once_a_window_has_passed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Passes closer together than ``PACE_WINDOW_MS`` keep the last reading: a pass or two is
    too short a window to tell a pace from noise."""
    buffer, clock, started = _paced(monkeypatch, limit=256, floor=48)
    clock.now += prefetch_module.PACE_WINDOW_MS / 1000
    started[0] += 300  # 3,000 a second: 150 rows
    assert buffer.room() == 150
    clock.now += 0.01
    started[0] += 1_300  # 130,000 a second over 10 ms: not read yet
    assert buffer.room() == 150
    clock.now += prefetch_module.PACE_WINDOW_MS / 1000
    assert buffer.room() == 256  # read now: 1,300 runs in 110 ms, 590 rows of pace, 256 at most


def test_the_room_is_the_paced_size_less_the_rows_held(monkeypatch: pytest.MonkeyPatch) -> None:
    buffer, clock, started = _paced(monkeypatch, limit=256, floor=48)
    clock.now += 0.2
    started[0] += 400
    assert buffer.room() == 100
    for n in range(30):
        buffer.rows.append((object(), n, clock.now))  # type: ignore[arg-type]
    assert buffer.room() == 70
    buffer.rows.clear()


def test_a_limit_under_the_floor_is_the_whole_buffer(monkeypatch: pytest.MonkeyPatch) -> None:
    """``claim_ahead`` below three a slot is honoured as it is, at any pace."""
    buffer, clock, started = _paced(monkeypatch, limit=4, floor=48)
    assert (buffer.floor, buffer.room()) == (4, 4)
    clock.now += 0.2
    started[0] += 4_000
    assert buffer.room() == 4


async def test_stop_hands_the_buffered_rows_back_uncounted() -> None:
    driver = memory_driver()
    gate = Gate()
    handle = declare(gate)
    ids = [await enqueue(driver, handle, n) for n in range(7)]
    worker = make_worker(driver, [handle], concurrency=3, claim_ahead=3)
    await worker.start()
    await worker.signals.wait("pass", lambda p: p.claimed == 6)
    assert len(worker.prefetch) == 3
    assert worker.slots.in_flight == 3
    stopping = asyncio.ensure_future(worker.stop())
    await asyncio.sleep(0)
    gate.open.set()
    await stopping
    assert len(gate.started) == 3  # the buffered rows never ran
    states = [await row(driver, job_id) for job_id in ids]
    ran = [r for r in states if r.state == "done"]
    back = [r for r in states if r.state == "ready"]
    assert [r.attempt for r in ran] == [1, 1, 1]
    assert [r.attempt for r in back] == [0, 0, 0, 0]  # 3 buffered + 1 never claimed
    assert worker.prefetch.returned == 3
    # The next worker runs them, each as its first attempt.
    again = make_worker(driver, [handle], concurrency=4)
    await again.start()
    try:
        await settled(again, 4)
    finally:
        await again.stop()
    assert sorted(i.n for i in gate.started) == list(range(7))
    for job_id in ids:
        r = await row(driver, job_id)
        assert (r.state, r.attempt) == ("done", 1)


async def test_a_row_on_its_final_attempt_is_buffered_and_a_crash_does_not_bury_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A buffered row is claimed AHEAD: a worker that dies with it costs it nothing, so its
    final attempt is no reason to keep it out of the buffer (issue 30, point 3)."""
    monkeypatch.setattr(prefetch_module, "PREFETCH_MAX_WAIT_MS", 60_000)  # no sweep here
    driver, clock = frozen()
    gate = Gate()
    handle = declare(gate, retry={"attempts": 1})
    ids = [await enqueue(driver, handle, n) for n in range(3)]
    dies = make_worker(
        driver, [handle], concurrency=1, claim_ahead=2, visibility_timeout_ms=240_000
    )
    await dies.start()
    await gate.entered.wait()
    assert len(dies.prefetch) == 2  # held, not handed back
    dies.loop.halt()  # the worker "dies": no more claims, no more renewals
    await dies.heartbeat.stop()
    clock.advance(240_000)
    after = make_worker(driver, [handle], concurrency=3)
    await after.run_once()
    gate.open.set()
    runs = await settled(after, 2)
    assert sorted((e.job_id, e.attempt, e.outcome) for e in runs) == sorted(
        (job_id, 1, "completed") for job_id in ids[1:]
    )
    dead = await row(driver, ids[0])  # it was running on its one attempt: that one counted
    assert (dead.state, dead.attempt) == ("dead", 1)
    await after.stop()
    await dies.stop()  # its late settles are fenced off


async def test_a_row_that_waited_too_long_goes_back_and_claim_ahead_pauses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(prefetch_module, "PREFETCH_MAX_WAIT_MS", 20)
    driver = memory_driver()
    gate = Gate()
    handle = declare(gate)
    ids = [await enqueue(driver, handle, n) for n in range(4)]
    worker = make_worker(driver, [handle], concurrency=2, claim_ahead=2)
    await worker.start()
    try:
        await worker.signals.wait("pass", lambda p: p.claimed == 4)
        while worker.prefetch.returned < 2:
            await asyncio.sleep(0.01)
        assert len(worker.prefetch) == 0
        assert worker.prefetch.room() == 0
        while len([r for r in [await row(driver, i) for i in ids] if r.state == "ready"]) < 2:
            await asyncio.sleep(0.01)  # the hand-backs land
        back = [r for r in [await row(driver, i) for i in ids] if r.state == "ready"]
        assert [r.attempt for r in back] == [0, 0]
        gate.open.set()
        await settled(worker, 4)  # the rows handed back are claimed again (into free slots)
    finally:
        gate.open.set()
        await worker.stop()
    assert sorted(i.n for i in gate.started) == [0, 1, 2, 3]
    for job_id in ids:
        r = await row(driver, job_id)
        assert (r.state, r.attempt) == ("done", 1)


async def test_claim_ahead_is_a_whole_number_and_ignored_over_several_queues() -> None:
    driver = memory_driver()
    handle = declare(Gate())
    with pytest.raises(InvariantError):
        make_worker(driver, [handle], claim_ahead=-1)
    worker = make_worker(driver, [handle], queues=["a", "b"], claim_ahead=8)
    assert worker.options.claim_ahead == 8
    assert worker.prefetch.limit == 0
