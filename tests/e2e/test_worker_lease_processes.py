"""Issue 30, with real worker processes: a worker frozen (SIGSTOP) past its lease starts no new
step when it resumes; rows a killed worker had claimed ahead and never started come back with
their attempt (Postgres and Redis); a poison pill claimed ahead still exhausts its attempts."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.e2e.test_worker_processes import (
    ROOT,
    VISIBILITY_MS,
    WAIT_S,
    WorkerProcess,
    _until_state,
)
from tests.e2e.worker_app import pill, quick, sticky, two_steps
from tests.support.redis_keys import redis_test_driver
from ujobs.clock import SYSTEM_CLOCK
from ujobs.drivers.base import AHEAD_RETURNS_MAX, LEASE_LAPSED_FINAL_ATTEMPT
from ujobs.drivers.postgres import postgres_driver
from ujobs.drivers.redis import RedisDriver

pytestmark = pytest.mark.slow

WINDOW_MS = "3000"


class DoomedWorker(WorkerProcess):
    """A worker process that may die before it says ``ready`` (a poison pill kills it)."""

    @classmethod
    async def start(cls, dsn: str, *args: str) -> DoomedWorker:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tests.e2e.worker_main", dsn,
            "--visibility-ms", str(VISIBILITY_MS), *args,
            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        return cls(proc)

    async def killed_or_idle(self, pg_pool: Any, job_id: str) -> bool:
        """True once the process died of SIGKILL; False once ``job_id`` is dead (buried by
        this worker's claim) with the process alive."""
        deadline = asyncio.get_running_loop().time() + WAIT_S
        while asyncio.get_running_loop().time() < deadline:
            if self.proc.returncode is not None:
                assert self.proc.returncode == -signal.SIGKILL, self.proc.returncode
                return True
            if await pg_pool.fetchval("select state from x_jobs where id = $1", job_id) == "dead":
                return False
            await asyncio.sleep(0.05)
        raise AssertionError(f"{job_id} neither killed its worker nor died")


def _is(event: str, job_id: str, **fields: Any) -> Any:
    def match(line: dict[str, Any]) -> bool:
        return (
            line["event"] == event
            and line.get("job_id") == job_id
            and all(line.get(k) == v for k, v in fields.items())
        )

    return match


async def test_a_worker_frozen_past_its_lease_starts_no_new_step_when_resumed(
    pg_pool: Any, pg_dsn: str
) -> None:
    driver = postgres_driver(pg_pool)
    # The frozen worker's renewal is due 2.5 s after its claim, its body's pause ends after
    # 1 s: resumed, the body's timer usually fires first, so only the step's own guard can stop
    # `b`. The registry beat shares the heartbeat timer on its own phase (from the worker's
    # start): on a slow start it can fall due before the pause ends, and then the timer's window
    # check halts the body first (a cancel). Either way `b` never starts; the guard alone is
    # pinned by tests/unit/test_worker_lease_guard.py.
    frozen = await WorkerProcess.spawn(
        pg_dsn, "--worker-id", "frozen", "--visibility-ms", WINDOW_MS, "--heartbeat-ms", "2500"
    )
    job_id = (await driver.enqueue(two_steps.request({"n": 1}))).id
    await frozen.until(_is("paused", job_id, attempt=1))
    frozen.kill(signal.SIGSTOP)
    other = await WorkerProcess.spawn(pg_dsn, "--worker-id", "other", "--visibility-ms", WINDOW_MS)
    try:
        done = await _until_state(pg_pool, job_id, "done")
        assert done["attempt"] == 2  # the lease lapsed; the other worker took the job
        await other.until(_is("effect", job_id, step="b", attempt=2))
        assert not any(_is("effect", job_id, step="a")(line) for line in other.lines)
        frozen.kill(signal.SIGCONT)
        halted = await frozen.until(_is("halted", job_id, attempt=1))
        assert not any(_is("effect", job_id, step="b")(line) for line in frozen.lines)
        # Refused at the step (the guard) or halted by the timer's window check, never at the save.
        assert halted["error"] in ("JobAbortedError", "CancelledError")
    finally:
        frozen.kill(signal.SIGCONT)
        frozen.kill(signal.SIGTERM)
        other.kill(signal.SIGTERM)
    assert await frozen.exit_code() == 0
    assert await other.exit_code() == 0
    assert "jobs.lease.lost" in await frozen.stderr()
    run_id = await pg_pool.fetchval("select run_id from x_jobs where id = $1", job_id)
    assert [s.name for s in await driver.load_steps(run_id, tenant_id=None)] == ["a", "b"]


async def _jobs(pg_pool: Any, ids: list[str]) -> dict[str, tuple[str, int, bool]]:
    rows = await pg_pool.fetch(
        "select id, state, attempt, ahead from x_jobs where id = any($1::text[])", ids
    )
    return {r["id"]: (r["state"], r["attempt"], r["ahead"]) for r in rows}


async def test_rows_claimed_ahead_by_a_killed_worker_come_back_with_their_attempt(
    pg_pool: Any, pg_dsn: str
) -> None:
    driver = postgres_driver(pg_pool)
    held = (await driver.enqueue(sticky.request({"n": 1}))).id  # hangs on attempt 1
    waiting = [(await driver.enqueue(quick.request({"n": n}))).id for n in range(3)]
    # One slot, three rows ahead: the first claim runs `held` and buffers the three.
    first = await WorkerProcess.spawn(
        pg_dsn, "--worker-id", "first", "--concurrency", "1", "--claim-ahead", "3"
    )
    await first.started(held)
    first.kill(signal.SIGKILL)  # well inside the buffer's 500 ms wait
    assert await first.exit_code() == -signal.SIGKILL
    before = await _jobs(pg_pool, waiting)
    assert set(before.values()) == {("running", 1, True)}  # claimed, counted, never started
    second = await WorkerProcess.spawn(pg_dsn, "--worker-id", "second")
    try:
        for job_id in waiting:
            started = await second.started(job_id)
            assert started["attempt"] == 1  # the lapse cost it nothing
        await _until_state(pg_pool, held, "done")
        assert (await second.started(held))["attempt"] == 2  # it ran: its lapse counted
    finally:
        second.kill(signal.SIGTERM)
    assert await second.exit_code() == 0
    after = await _jobs(pg_pool, [held, *waiting])
    assert after[held][:2] == ("done", 2)
    assert {after[j][:2] for j in waiting} == {("done", 1)}


async def test_a_poison_pill_claimed_ahead_still_dies_after_its_attempts(
    pg_pool: Any, pg_dsn: str
) -> None:
    """The pill is claimed AHEAD behind a quick job and kills its worker as its body starts,
    whether or not its start mark left the process first: it is dead-lettered once its
    attempts are spent, after at most AHEAD_RETURNS_MAX uncounted returns."""
    driver = postgres_driver(pg_pool)
    await driver.enqueue(quick.request({"n": 1}))  # takes the slot: the pill waits ahead
    poison = (await driver.enqueue(pill.request({"n": 1}))).id
    args = ("--concurrency", "1", "--claim-ahead", "3")
    kills = 0
    survivor: DoomedWorker | None = None
    try:
        for _ in range(pill.retry.attempts + AHEAD_RETURNS_MAX + 1):
            proc = await DoomedWorker.start(pg_dsn, *args)
            if await proc.killed_or_idle(pg_pool, poison):
                kills += 1
                continue
            survivor = proc
            break
        assert survivor is not None, "the pill never stopped killing its workers"
        row = await _until_state(pg_pool, poison, "dead")
        assert (row["attempt"], row["last_error"]) == (
            pill.retry.attempts,
            LEASE_LAPSED_FINAL_ATTEMPT,
        )
        assert pill.retry.attempts <= kills <= pill.retry.attempts + AHEAD_RETURNS_MAX
    finally:
        if survivor is not None:
            survivor.kill(signal.SIGTERM)
    assert survivor is not None
    assert await survivor.exit_code() == 0


@pytest.fixture
async def redis(redis_url: str, redis_prefix: str) -> AsyncIterator[RedisDriver]:
    async with redis_test_driver(redis_url, redis_prefix, clock=SYSTEM_CLOCK) as drv:
        yield drv


async def test_on_redis_rows_claimed_ahead_by_a_killed_worker_keep_their_attempt(
    redis: RedisDriver, redis_url: str, redis_prefix: str
) -> None:
    held = (await redis.enqueue(sticky.request({"n": 1}))).id
    waiting = [(await redis.enqueue(quick.request({"n": n}))).id for n in range(3)]
    on_redis = ("--redis-prefix", redis_prefix)
    first = await WorkerProcess.spawn(
        redis_url, *on_redis, "--worker-id", "first", "--concurrency", "1", "--claim-ahead", "3"
    )
    await first.started(held)
    first.kill(signal.SIGKILL)
    assert await first.exit_code() == -signal.SIGKILL
    second = await WorkerProcess.spawn(redis_url, *on_redis, "--worker-id", "second")
    try:
        for job_id in waiting:
            assert (await second.started(job_id))["attempt"] == 1
        assert (await second.started(held))["attempt"] == 2
    finally:
        second.kill(signal.SIGTERM)
    assert await second.exit_code() == 0
