"""A process claiming with the Redis driver, killed with SIGKILL mid-job, loses no job.

The child (``tests/fixtures/redis_crash_claimer.py``) is a small claim/ack loop, not the full
worker: it acks three jobs, claims a fourth and keeps its lease alive until it is killed. Once
its lease lapses (one visibility timeout after its last heartbeat), another claimer takes the
fourth job as attempt 2, and every job is done exactly once.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from shared.clock import SYSTEM_CLOCK
from shared.drivers.base import ClaimedJob, ClaimOptions, EnqueueRequest
from tests.fixtures.redis_keys import redis_test_driver

ROOT = Path(__file__).resolve().parents[2]
VISIBILITY_MS = 1_500


async def read_line(proc: asyncio.subprocess.Process, prefix: str) -> str:
    """The child's next stdout line, which must start with ``prefix``; answers its id."""
    assert proc.stdout is not None
    line = (await asyncio.wait_for(proc.stdout.readline(), timeout=30)).decode()
    if not line.startswith(prefix):
        assert proc.stderr is not None
        err = (await proc.stderr.read()).decode()
        raise AssertionError(f"child said {line!r}; stderr: {err}")
    return line.split()[1]


@pytest.mark.slow
async def test_a_claimer_killed_mid_job_loses_no_job(redis_url: str, redis_prefix: str) -> None:
    async with redis_test_driver(redis_url, redis_prefix, clock=SYSTEM_CLOCK) as driver:
        ids = [f"job-{i}" for i in range(10)]
        await driver.enqueue_many(
            [EnqueueRequest(name="crash", input=i, idempotency_key=i, id=i) for i in ids]
        )
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.fixtures.redis_crash_claimer",
            redis_url,
            redis_prefix,
            "3",
            str(VISIBILITY_MS),
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            acked_by_child = [await read_line(proc, "acked") for _ in range(3)]
            in_flight = await read_line(proc, "claimed")
        finally:
            proc.send_signal(signal.SIGKILL)
            await asyncio.wait_for(proc.wait(), timeout=10)
        assert proc.returncode == -signal.SIGKILL

        options = ClaimOptions(
            queues=["default"], limit=10, worker_id="survivor", visibility_ms=60_000
        )
        taken: dict[str, ClaimedJob] = {}
        deadline = time.monotonic() + 30
        while in_flight not in taken:
            assert time.monotonic() < deadline, "the dead claimer's job never came back"
            for job in await driver.claim(options):
                assert job.id not in taken
                taken[job.id] = job
            if in_flight not in taken:
                await asyncio.sleep(0.1)
        # It came back once its lease lapsed, as the next attempt, to the survivor.
        assert taken[in_flight].attempt == 2
        assert taken[in_flight].worker_id == "survivor"
        for job in taken.values():
            assert await driver.ack(job.id, job.ref)
        assert sorted(acked_by_child + list(taken)) == sorted(ids)
        stats = (await driver.stats()).queues["default"]
        assert (stats.done, stats.ready, stats.running) == (10, 0, 0)
