"""Claim-ahead (``ClaimOptions.ahead_after``): the rows past the worker's free slots are claimed
AHEAD, and a worker that dies with them never started costs their jobs no attempt — while a
row that was started (``start_ahead``) counts, and a row handed back that way too often counts
again, so a poison pill still exhausts its attempts (issue 30, point 3)."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.support.conformance import VISIBILITY_MS, ExhaustedLog, claim, req
from ujobs.clock import FrozenClock
from ujobs.drivers.base import (
    AHEAD_RETURNS_MAX,
    ClaimedJob,
    ClaimRef,
    JobDriver,
    NackOptions,
)


async def _enqueue(driver: JobDriver, n: int, **kw: Any) -> list[str]:
    return [(await driver.enqueue(req(**kw))).id for _ in range(n)]


def _lapse(clock: FrozenClock) -> None:
    clock.advance(VISIBILITY_MS)


async def test_the_rows_past_the_free_slots_are_claimed_ahead(driver: JobDriver) -> None:
    ids = await _enqueue(driver, 4)
    got = await claim(driver, limit=4, ahead_after=1)
    assert [(j.id, j.ahead, j.attempt) for j in got] == [
        (ids[0], False, 1),
        (ids[1], True, 1),
        (ids[2], True, 1),
        (ids[3], True, 1),
    ]
    await _enqueue(driver, 2)
    assert [j.ahead for j in await claim(driver, limit=2)] == [False, False]  # none asked
    more = await _enqueue(driver, 2)
    assert [(j.id, j.ahead) for j in await claim(driver, limit=2, ahead_after=0)] == [
        (more[0], True),
        (more[1], True),
    ]


async def test_a_lapsed_row_that_never_started_comes_back_with_its_attempt(
    driver: JobDriver, clock: FrozenClock
) -> None:
    ids = await _enqueue(driver, 3)
    first = await claim(driver, limit=3, ahead_after=1, worker="died")
    assert await driver.start_ahead(first[2].id, first[2].ref)  # this one started
    _lapse(clock)
    again = {j.id: j for j in await claim(driver, limit=3, worker="w2")}
    assert again[ids[0]].attempt == 2  # went straight to a slot: it ran, it counts
    assert again[ids[1]].attempt == 1  # waited in the buffer: never started
    assert again[ids[2]].attempt == 2  # started from the buffer: counts
    assert not any(j.ahead for j in again.values())


async def test_a_lapsed_row_never_started_on_its_final_attempt_is_not_buried(
    driver: JobDriver, clock: FrozenClock
) -> None:
    (job_id,) = await _enqueue(driver, 1, max_attempts=1)
    await claim(driver, limit=1, ahead_after=0, worker="died")
    _lapse(clock)
    buried = ExhaustedLog()
    (again,) = await claim(driver, limit=1, on_exhausted=buried)
    assert (again.id, again.attempt) == (job_id, 1)
    assert buried.calls == []


async def test_a_row_handed_back_ahead_too_often_counts_again(
    driver: JobDriver, clock: FrozenClock
) -> None:
    """A body that kills its worker before its start left the process looks never started:
    it is handed out uncounted AHEAD_RETURNS_MAX times, then its lapse counts (and on its
    final attempt, buries it)."""
    (job_id,) = await _enqueue(driver, 1, max_attempts=2)
    for _ in range(AHEAD_RETURNS_MAX + 1):
        (job,) = await claim(driver, limit=1, ahead_after=0, worker="dies")
        assert job.attempt == 1
        _lapse(clock)
    (job,) = await claim(driver, limit=1, ahead_after=0, worker="dies")
    assert job.attempt == 2  # the cap is spent: this lapse counted
    _lapse(clock)
    buried = ExhaustedLog()
    assert await claim(driver, limit=1, on_exhausted=buried) == []
    ((row,),) = buried.calls
    assert (row.id, row.attempt, row.state) == (job_id, 2, "dead")


async def test_start_ahead_is_fenced_on_the_claim(driver: JobDriver, clock: FrozenClock) -> None:
    await _enqueue(driver, 1)
    (job,) = await claim(driver, limit=1, ahead_after=0, worker="w1")
    assert not await driver.start_ahead(job.id, ClaimRef("someone-else", job.claim))
    assert not await driver.start_ahead(job.id, ClaimRef(job.worker_id, job.claim + 1))
    _lapse(clock)
    (again,) = await claim(driver, limit=1, worker="w2")
    assert not await driver.start_ahead(job.id, job.ref)  # the old claim lost the row
    assert await driver.start_ahead(again.id, again.ref)


async def test_a_row_handed_back_from_the_buffer_keeps_its_attempt(driver: JobDriver) -> None:
    await _enqueue(driver, 2)
    _, ahead = await claim(driver, limit=2, ahead_after=1)
    assert await driver.nack(ahead.id, ahead.ref, NackOptions(count=False, run_at_ms=0))
    (again,) = await claim(driver, limit=1)
    assert (again.id, again.attempt, again.ahead) == (ahead.id, 1, False)


async def test_starts_and_acks_sent_together_each_answer_for_themselves(
    driver: JobDriver,
) -> None:
    """Both are coalesced while one is in flight (Postgres, Redis): each keeps its own fence."""
    await _enqueue(driver, 3)
    rows: list[ClaimedJob] = await claim(driver, limit=3, ahead_after=1)
    answers = await asyncio.gather(
        driver.ack(rows[0].id, rows[0].ref),
        driver.start_ahead(rows[1].id, rows[1].ref),
        driver.start_ahead(rows[2].id, ClaimRef("nobody", rows[2].claim)),
        driver.ack(rows[2].id, rows[2].ref),
    )
    assert list(answers) == [True, True, False, True]
