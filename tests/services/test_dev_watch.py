"""``ujobs dev``'s commentary: one line per job state change and per task fire, read through
the operator surface; what was there before it started is not narrated."""

from __future__ import annotations

from ujobs.clock import FrozenClock
from ujobs.drivers.base import ClaimedJob, ClaimOptions, EnqueueRequest, NackOptions
from ujobs.drivers.memory.driver import MemoryDriver, memory_driver
from ujobs.introspect import short_id
from ujobs.services.dev.watch import DevWatch


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
    assert lines[-1].startswith(f"{head}: attempt 1 of 3 failed, retry scheduled for ")
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


async def test_a_job_first_seen_after_a_failed_attempt_is_a_scheduled_retry() -> None:
    """The watch polls: a job that failed its first attempt before the watch saw it is a
    retry, never narrated as "enqueued"; and only its error's first line is told."""
    clock = FrozenClock(1_700_000_000_000)
    driver = memory_driver(clock=clock)
    introspect = driver.introspect
    assert introspect is not None
    lines: list[str] = []
    watch = DevWatch(introspect, say=lines.append)
    await watch.prime()
    job = await driver.enqueue(request("quick-failure"))
    first = await claim(driver)
    trace = 'RuntimeError: mail down\nTraceback (most recent call last):\n  File "x.py"'
    await driver.nack(job.id, first.ref, NackOptions(error=trace, run_at_ms=clock.now_ms() + 1_000))
    await watch.run_once()
    assert lines == [
        f"onboard_org {short_id(job.id)}: attempt 1 of 3 failed, retry scheduled for 22:13:21 "
        "— RuntimeError: mail down"
    ]


async def test_an_attempt_that_failed_between_two_polls_is_a_scheduled_retry() -> None:
    """Seen ready, then ready again one attempt later (claimed, run and failed between two
    polls): a scheduled retry, never a bare state name."""
    clock = FrozenClock(1_700_000_000_000)
    driver = memory_driver(clock=clock)
    introspect = driver.introspect
    assert introspect is not None
    lines: list[str] = []
    watch = DevWatch(introspect, say=lines.append)
    await watch.prime()
    job = await driver.enqueue(request("fails-between-polls"))
    head = f"onboard_org {short_id(job.id)}"
    await watch.run_once()
    assert lines == [f"{head}: enqueued on 'default'"]
    first = await claim(driver)
    await driver.nack(
        job.id,
        first.ref,
        NackOptions(error="RuntimeError: mail down", run_at_ms=clock.now_ms() + 1_000),
    )
    await watch.run_once()
    assert lines[-1] == (
        f"{head}: attempt 1 of 3 failed, retry scheduled for 22:13:21 — RuntimeError: mail down"
    )
