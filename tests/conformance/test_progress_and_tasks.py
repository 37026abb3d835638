"""Progress (fenced, throttled, forced last write), task pauses and task fires."""

from __future__ import annotations

import pytest

from tests.support.conformance import claim_one, req
from ujobs.clock import FrozenClock
from ujobs.drivers.base import (
    MAX_TASK_FIRES,
    PROGRESS_INTERVAL_MS,
    ClaimRef,
    JobDriver,
    JobIntrospection,
    NackOptions,
    TaskFire,
)


async def _progress(introspect: JobIntrospection, job_id: str) -> object:
    row = await introspect.get(job_id)
    assert row is not None
    return row.progress


async def test_progress_is_written_under_the_claim(
    driver: JobDriver, introspect: JobIntrospection
) -> None:
    await driver.enqueue(req())
    job = await claim_one(driver)
    assert await _progress(introspect, job.id) is None
    progress = {"done": 1, "total": 4, "note": "account a1"}
    assert await introspect.record_progress(job.id, job.ref, progress)
    assert await _progress(introspect, job.id) == progress


async def test_progress_is_fenced_on_the_claim(
    driver: JobDriver, introspect: JobIntrospection, clock: FrozenClock
) -> None:
    await driver.enqueue(req())
    old = await claim_one(driver, worker="w1", visibility_ms=1_000)
    clock.advance(1_000)
    new = await claim_one(driver, worker="w1")
    assert not await introspect.record_progress(old.id, old.ref, {"done": 9})
    assert not await introspect.record_progress(old.id, old.ref, {"done": 9}, force=True)
    assert not await introspect.record_progress(new.id, ClaimRef("w2", new.claim), {"done": 9})
    assert await _progress(introspect, new.id) is None
    await driver.ack(new.id, new.ref)
    assert not await introspect.record_progress(new.id, new.ref, {"done": 9}, force=True)


async def test_progress_is_throttled_per_run_and_the_last_write_can_be_forced(
    driver: JobDriver, introspect: JobIntrospection, clock: FrozenClock
) -> None:
    await driver.enqueue(req())
    job = await claim_one(driver)
    assert await introspect.record_progress(job.id, job.ref, {"done": 1})
    clock.advance(PROGRESS_INTERVAL_MS - 1)
    assert await introspect.record_progress(job.id, job.ref, {"done": 2}), "the claim holds"
    assert await _progress(introspect, job.id) == {"done": 1}, "dropped by the throttle"
    clock.advance(1)
    assert await introspect.record_progress(job.id, job.ref, {"done": 3})
    assert await _progress(introspect, job.id) == {"done": 3}
    clock.advance(10)
    assert await introspect.record_progress(job.id, job.ref, {"done": 4}, force=True)
    assert await _progress(introspect, job.id) == {"done": 4}
    clock.advance(10)
    assert await introspect.record_progress(job.id, job.ref, {"done": 5})
    assert await _progress(introspect, job.id) == {"done": 4}, (
        "a forced write restarts the interval"
    )


async def test_the_throttle_is_per_run(driver: JobDriver, introspect: JobIntrospection) -> None:
    await driver.enqueue_many([req(), req()])
    a = await claim_one(driver)
    b = await claim_one(driver)
    assert await introspect.record_progress(a.id, a.ref, "a")
    assert await introspect.record_progress(b.id, b.ref, "b")
    assert (await _progress(introspect, a.id), await _progress(introspect, b.id)) == ("a", "b")


@pytest.mark.parametrize("settle", ["ack", "nack"])
async def test_the_value_the_throttle_held_back_lands_with_the_settle(
    driver: JobDriver, introspect: JobIntrospection, clock: FrozenClock, settle: str
) -> None:
    await driver.enqueue(req())
    job = await claim_one(driver)
    assert await introspect.record_progress(job.id, job.ref, {"done": 1, "total": 3})
    clock.advance(10)
    assert await introspect.record_progress(job.id, job.ref, {"done": 2, "total": 3})
    clock.advance(10)
    assert await introspect.record_progress(job.id, job.ref, {"done": 3, "total": 3})
    assert await _progress(introspect, job.id) == {"done": 1, "total": 3}
    if settle == "ack":
        assert await driver.ack(job.id, job.ref)
    else:
        assert await driver.nack(job.id, job.ref, NackOptions(error="x", dead_letter=True))
    assert await _progress(introspect, job.id) == {"done": 3, "total": 3}


async def test_task_pauses(introspect: JobIntrospection) -> None:
    assert await introspect.paused_tasks() == []
    await introspect.pause_task("nightly-digest")
    await introspect.pause_task("hourly-sync")
    await introspect.pause_task("hourly-sync")
    assert await introspect.paused_tasks() == ["hourly-sync", "nightly-digest"]
    await introspect.resume_task("hourly-sync")
    await introspect.resume_task("never-paused")
    assert await introspect.paused_tasks() == ["nightly-digest"]
    assert await introspect.paused_queues() == [], "task and queue pauses are apart"


async def test_task_fires_keep_the_last_fire_per_task(
    introspect: JobIntrospection, clock: FrozenClock
) -> None:
    assert await introspect.task_fires() == []
    t0 = clock.now_ms()
    await introspect.record_task_fire("nightly", t0 - 500)
    clock.advance(10)
    await introspect.record_task_fire("hourly", t0 - 100)
    clock.advance(3_600_000)
    await introspect.record_task_fire("hourly", t0 + 3_600_000 - 100)
    assert await introspect.task_fires() == [
        TaskFire(task="hourly", occurrence_ms=t0 + 3_600_000 - 100, fired_at_ms=clock.now_ms()),
        TaskFire(task="nightly", occurrence_ms=t0 - 500, fired_at_ms=t0),
    ]


async def test_task_fires_are_bounded(introspect: JobIntrospection) -> None:
    for i in range(MAX_TASK_FIRES + 3):
        await introspect.record_task_fire(f"task-{i:05d}", i)
    fires = await introspect.task_fires()
    assert len(fires) == MAX_TASK_FIRES
    assert fires[0].task == "task-00000"
