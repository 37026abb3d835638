"""The real worker as an OS process on the REDIS driver, its PRIVATE redis-server restarted
without persistence while it holds rows: the process logs the empty keyspace ONCE, as an
error (``jobs.store.lost``), not a warning or an error per held row, and keeps working."""

from __future__ import annotations

import asyncio
import signal

import pytest
from redis.asyncio import Redis

from tests.e2e.test_worker_processes import VISIBILITY_MS, WAIT_S, WorkerProcess
from tests.e2e.worker_app import quick, sticky
from tests.support.restartable import PrivateRedis
from ujobs.clock import SYSTEM_CLOCK
from ujobs.drivers.redis import RedisDriver

pytestmark = pytest.mark.slow

PER_ROW = ("jobs.lease.lost", "jobs.settle.unowned", "jobs.attempt.failed")


async def test_a_worker_process_reports_a_redis_back_empty_once() -> None:
    with PrivateRedis(aof=False) as server:
        client = Redis.from_url(server.url)
        driver = RedisDriver(client, prefix="e2eloss", clock=SYSTEM_CLOCK)
        try:
            held = [(await driver.enqueue(sticky.request({"n": n}))).id for n in range(3)]
            worker = await WorkerProcess.spawn(server.url, "--redis-prefix", "e2eloss")
            for job_id in held:
                await worker.started(job_id)
            await asyncio.to_thread(server.restart)
            assert worker.proc.stderr is not None
            async with asyncio.timeout(WAIT_S):
                seen: list[str] = []
                while not any("jobs.store.lost" in line for line in seen):
                    seen.append((await worker.proc.stderr.readline()).decode())
            after = (await driver.enqueue(quick.request({"n": 1}))).id
            await worker.started(after)  # the queue works on, on the new keyspace
            # A few heartbeats, so every held row's renewal meets the empty keyspace too.
            await asyncio.sleep(3 * VISIBILITY_MS / 3 / 1000)
            worker.kill(signal.SIGTERM)
            assert await worker.exit_code() == 0
            lines = seen + (await worker.stderr()).splitlines()
        finally:
            await driver.close()
            await client.aclose()
    reports = [line for line in lines if "jobs.store.lost" in line]
    assert [line.split()[0] for line in reports] == ["ERROR"]
    per_row = [line for line in lines if any(event in line for event in PER_ROW)]
    assert per_row == []  # logged at debug: the one report covers them
