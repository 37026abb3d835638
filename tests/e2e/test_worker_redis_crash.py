"""The real worker as an OS process on the REDIS driver, killed with SIGKILL mid-job: no job is
lost. Its leases lapse one visibility timeout later, a second worker process takes the jobs it
held (as their next attempt) and buries the one that was on its final attempt; every other
job ran once and was settled once."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest

from tests.e2e.test_worker_processes import WAIT_S, WorkerProcess
from tests.e2e.worker_app import QUEUE, doomed, quick, sticky
from tests.support.redis_keys import redis_test_driver
from ujobs.clock import SYSTEM_CLOCK
from ujobs.drivers.redis.driver import RedisDriver

pytestmark = pytest.mark.slow

QUICK = 12


@pytest.fixture
async def driver(redis_url: str, redis_prefix: str) -> AsyncIterator[RedisDriver]:
    async with redis_test_driver(redis_url, redis_prefix, clock=SYSTEM_CLOCK) as drv:
        yield drv


async def until_counts(driver: RedisDriver, **want: int) -> None:
    """Poll the queue's tallies until each named state holds the wanted count."""
    async with asyncio.timeout(WAIT_S):
        while True:
            stats = (await driver.stats()).queues.get(QUEUE)
            if stats is not None and all(getattr(stats, k) == v for k, v in want.items()):
                return
            await asyncio.sleep(0.05)


async def every_line(worker: WorkerProcess) -> list[dict[str, Any]]:
    """Every line the (exited) process printed: those read so far and the rest of its pipe."""
    assert worker.proc.stdout is not None
    rest = await asyncio.wait_for(worker.proc.stdout.read(), WAIT_S)
    return worker.lines + [orjson.loads(raw) for raw in rest.splitlines() if raw.strip()]


async def test_a_sigkilled_worker_on_redis_loses_no_job(
    driver: RedisDriver, redis_url: str, redis_prefix: str
) -> None:
    held = [(await driver.enqueue(sticky.request({"n": n}))).id for n in (1, 2)]
    final = (await driver.enqueue(doomed.request({"n": 1}))).id
    fast = [(await driver.enqueue(quick.request({"n": n}))).id for n in range(QUICK)]

    first = await WorkerProcess.spawn(
        redis_url, "--redis-prefix", redis_prefix, "--worker-id", "first"
    )
    for job_id in (*held, final):
        await first.started(job_id)
    await until_counts(driver, done=QUICK, running=3)  # the quick ones settled, three held
    first.kill(signal.SIGKILL)
    assert await first.exit_code() == -signal.SIGKILL
    stats = (await driver.stats()).queues[QUEUE]
    assert (stats.running, stats.ready, stats.done) == (3, 0, QUICK)  # nobody released them

    second = await WorkerProcess.spawn(
        redis_url, "--redis-prefix", redis_prefix, "--worker-id", "second"
    )
    try:
        await until_counts(driver, done=QUICK + 2, dead=1, running=0, ready=0)
        for job_id in held:
            assert (await second.started(job_id))["attempt"] == 2  # redelivered, next attempt
    finally:
        second.kill(signal.SIGTERM)
    assert await second.exit_code() == 0
    assert "jobs.claim.exhausted" in await second.stderr()

    lines = await every_line(first) + await every_line(second)
    started = [(line["job_id"], line["attempt"]) for line in lines if line["event"] == "started"]
    # Every quick job ran exactly once (in the first worker); each held job ran twice (one
    # attempt per worker); the final-attempt job ran once and was buried, never handed out.
    assert sorted(started) == sorted(
        [(j, 1) for j in fast] + [(j, a) for j in held for a in (1, 2)] + [(final, 1)]
    )
    # Each settle landed once: the counters saw QUICK + 2 done and one dead, nothing more.
    buckets = await driver.counter_buckets(sticky.name, 0)
    buckets += await driver.counter_buckets(quick.name, 0)
    buckets += await driver.counter_buckets(doomed.name, 0)
    assert sum(b.done for b in buckets) == QUICK + 2
    assert (sum(b.dead for b in buckets), sum(b.retried for b in buckets)) == (1, 0)
