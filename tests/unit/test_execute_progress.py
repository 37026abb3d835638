"""``run.progress``: at most one write per PROGRESS_INTERVAL_MS per run, plus the last one
before the settle, fenced on the claim."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.support.execute import attempt, claim, enqueue, frozen_driver, row
from ujobs.drivers.base import PROGRESS_INTERVAL_MS
from ujobs.errors import InvariantError
from ujobs.execution.progress import ProgressReporter
from ujobs.execution.run import Run
from ujobs.jobs.job import job


def _declare(body: Any) -> Any:
    return job(idempotency_key="k", tenant="none", name=f"t.{body.__name__}")(body)


async def test_a_burst_writes_once_then_the_last_value_before_the_settle() -> None:
    driver, clock = frozen_driver()
    seen: list[Any] = []

    async def loops(run: Run[Any]) -> None:
        for done in range(5):
            run.progress(done, 4 if done < 4 else 5, f"row {done}")
            await asyncio.sleep(0)  # let a write in flight land
            seen.append((await row(driver, run.job_id)).progress)
        assert isinstance(run.progress, ProgressReporter)
        assert run.progress.writes == 1  # the rest fell inside the interval

    handle = _declare(loops)
    job_id = await enqueue(driver, handle)
    assert (await attempt(driver, handle)).outcome == "completed"
    assert seen[0] == {"done": 0, "total": 4, "note": "row 0", "atMs": clock.now_ms()}
    assert all(p == seen[0] for p in seen)
    final = (await row(driver, job_id)).progress
    assert final == {"done": 4, "total": 5, "note": "row 4", "atMs": clock.now_ms()}


async def test_each_interval_writes_again() -> None:
    driver, clock = frozen_driver()

    async def paced(run: Run[Any]) -> None:
        for done in range(3):
            run.progress(done, 2)
            await asyncio.sleep(0)
            assert (await row(driver, run.job_id)).progress["done"] == done
            clock.advance(PROGRESS_INTERVAL_MS)

    handle = _declare(paced)
    job_id = await enqueue(driver, handle)
    assert (await attempt(driver, handle)).outcome == "completed"
    assert (await row(driver, job_id)).progress["done"] == 2


async def test_a_failed_attempt_still_lands_its_last_progress() -> None:
    driver, _ = frozen_driver()

    async def partial(run: Run[Any]) -> None:
        run.progress(1, 10)
        run.progress(3, 10, "then it broke")
        raise ValueError("broke")

    handle = _declare(partial)
    job_id = await enqueue(driver, handle)
    assert (await attempt(driver, handle)).outcome == "retried"
    progress = (await row(driver, job_id)).progress
    assert (progress["done"], progress["note"]) == (3, "then it broke")


async def test_bad_progress_is_refused_in_the_body() -> None:
    driver, _ = frozen_driver()
    errors: list[str] = []

    async def sloppy(run: Run[Any]) -> None:
        for args in [("1", 2), (1, float("nan")), (-1, 2), (True, 2)]:
            try:
                run.progress(*args)
            except InvariantError as exc:
                errors.append(exc.code)
        with pytest.raises(InvariantError):
            run.progress(1, 2, note=3)

    handle = _declare(sloppy)
    await enqueue(driver, handle)
    assert (await attempt(driver, handle)).outcome == "completed"
    assert errors == ["X_INVARIANT"] * 4


async def test_a_stale_claims_progress_is_dropped_and_a_settled_reporter_writes_nothing() -> None:
    driver, clock = frozen_driver()

    async def idle(run: Run[Any]) -> None:
        return None

    handle = _declare(idle)
    job_id = await enqueue(driver, handle)
    stale = await claim(driver, visibility_ms=1_000)
    clock.advance(1_000)
    current = await claim(driver, worker="w2")
    reporter = ProgressReporter(
        introspect=driver.introspect, job_id=job_id, ref=stale.ref, clock=clock
    )
    reporter(1, 2)
    await reporter.flush()
    assert (await row(driver, job_id)).progress is None  # fenced: not this claim's run
    live = ProgressReporter(
        introspect=driver.introspect, job_id=job_id, ref=current.ref, clock=clock
    )
    live(1, 2)
    await live.flush()
    live(2, 2)  # after the flush the attempt is settling: nothing more is recorded
    await live.flush()
    assert (await row(driver, job_id)).progress["done"] == 1
    assert live.writes == 1


async def test_no_introspection_records_nothing() -> None:
    _driver, clock = frozen_driver()
    reporter = ProgressReporter(introspect=None, job_id="j", ref=None, clock=clock)  # type: ignore[arg-type]
    reporter(1, 2)
    await reporter.flush()
    assert reporter.writes == 0
    assert reporter.latest == {"done": 1, "total": 2, "note": None}
