"""``ujobs dev``'s commentary: one line per job state change and per task fire, read through
the operator surface; what was there before it started is not narrated."""

from __future__ import annotations

from services.dev_watch import DevWatch
from shared.clock import FrozenClock
from shared.drivers.base import ClaimedJob, ClaimOptions, EnqueueRequest, NackOptions
from shared.drivers.memory.driver import MemoryDriver, memory_driver
from shared.introspect import short_id


def request(key: str, queue: str = "default") -> EnqueueRequest:
    return EnqueueRequest(name="onboard_org", input={}, idempotency_key=key, queue=queue)


async def claim(driver: MemoryDriver) -> ClaimedJob:
    [claimed] = await driver.claim(ClaimOptions(queues=["default"], limit=1, worker_id="w"))
    return claimed


async def test_the_watch_narrates_each_change_once() -> None:
    clock = FrozenClock(1_700_000_000_000)
    driver = memory_driver(clock=clock)
    await driver.enqueue(request("before-the-watch", queue="archive"))
    lines: list[str] = []
    introspect = driver.introspect
    assert introspect is not None
    watch = DevWatch(introspect, say=lines.append)
    await watch.prime()
    await watch.run_once()
    assert lines == []

    job = await driver.enqueue(request("new"))
    head = f"onboard_org {short_id(job.id)}"
    await watch.run_once()
    assert lines == [f"{head}: enqueued on 'default'"]
    first = await claim(driver)
    await watch.run_once()
    assert lines[-1] == f"{head}: running, attempt 1 of 3"
    retry = NackOptions(error="RuntimeError: mail down\n  at line 3", run_at_ms=clock.now_ms())
    await driver.nack(job.id, first.ref, retry)
    await watch.run_once()
    assert lines[-1].startswith(f"{head}: attempt 1 failed, retrying at ")
    assert lines[-1].endswith("— RuntimeError: mail down")
    second = await claim(driver)
    sleep = NackOptions(park=True, count=False, run_at_ms=clock.now_ms() + 5_000)
    await driver.nack(job.id, second.ref, sleep)
    await watch.run_once()
    assert lines[-1] == f"{head}: suspended until 22:13:25 (a step.sleep: no process holds it)"
    clock.advance(5_000)
    resumed = await claim(driver)
    assert await driver.ack(job.id, resumed.ref)
    await watch.run_once()
    assert lines[-1] == f"{head}: done after 2 attempt(s)"
    count = len(lines)
    await watch.run_once()
    assert len(lines) == count
    await introspect.requeue(job.id)
    await watch.run_once()
    assert lines[-1] == f"{head}: re-queued on 'default'"
    again = await claim(driver)
    assert await driver.ack(job.id, again.ref)
    await watch.run_once()
    assert lines[-1] == f"{head}: done after 1 attempt(s)"

    await introspect.record_task_fire("poll_fleet", 1_700_000_020_000)
    await watch.run_once()
    assert lines[-1] == "task poll_fleet: fired for 22:13:40"
