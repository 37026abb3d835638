"""The worker as a real OS process on Postgres: SIGKILL mid-job, SIGTERM mid-job, and a body
that ignores the signal — the crash-safety promises of § Roles, § Leases and § Drivers."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from pathlib import Path
from typing import Any, ClassVar

import asyncpg
import orjson
import pytest

from tests.e2e.worker_app import cooperative, doomed, gatherer, sticky, stubborn
from ujobs.drivers.base import LEASE_LAPSED_FINAL_ATTEMPT
from ujobs.drivers.postgres.driver import postgres_driver

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
VISIBILITY_MS = 1_500
WAIT_S = 30.0


class WorkerProcess:
    """One ``tests.e2e.worker_main`` process and the JSON lines it prints. Every one started is
    in ``live`` until ``reap_all`` (tests/e2e/conftest.py, after each test) has killed and
    waited for it, so a test that fails midway leaves no process nor a transport behind for
    the garbage collector to close on a later test's loop."""

    live: ClassVar[list[WorkerProcess]] = []

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.lines: list[dict[str, Any]] = []
        WorkerProcess.live.append(self)

    @classmethod
    async def reap_all(cls) -> None:
        """Kill (SIGCONT first: a frozen one cannot die) and wait for every process still up."""
        live, cls.live = cls.live, []
        for worker in live:
            if worker.proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    worker.proc.send_signal(signal.SIGCONT)
                    worker.proc.kill()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(worker.proc.communicate(), WAIT_S)

    @classmethod
    async def spawn(cls, dsn: str, *args: str) -> WorkerProcess:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tests.e2e.worker_main", dsn,
            "--visibility-ms", str(VISIBILITY_MS), *args,
            cwd=ROOT, env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        worker = cls(proc)
        await worker.until(lambda line: line["event"] == "ready")
        return worker

    async def until(self, predicate: Any) -> dict[str, Any]:
        assert self.proc.stdout is not None
        for line in self.lines:
            if predicate(line):
                return line
        while True:
            raw = await asyncio.wait_for(self.proc.stdout.readline(), WAIT_S)
            if not raw:
                raise AssertionError(f"the worker exited first: {await self.stderr()}")
            parsed: dict[str, Any] = orjson.loads(raw)
            self.lines.append(parsed)
            if predicate(parsed):
                return parsed

    async def started(self, job_id: str) -> dict[str, Any]:
        return await self.until(lambda e: e["event"] == "started" and e["job_id"] == job_id)

    async def exit_code(self) -> int:
        return await asyncio.wait_for(self.proc.wait(), WAIT_S)

    async def stderr(self) -> str:
        assert self.proc.stderr is not None
        return (await asyncio.wait_for(self.proc.stderr.read(), WAIT_S)).decode()

    def kill(self, signum: int) -> None:
        self.proc.send_signal(signum)


async def _row(pool: asyncpg.Pool[Any], job_id: str) -> asyncpg.Record:
    found: asyncpg.Record | None = await pool.fetchrow(
        "select state, attempt, last_error from x_jobs where id = $1", job_id
    )
    assert found is not None
    return found


async def _until_state(pool: asyncpg.Pool[Any], job_id: str, state: str) -> asyncpg.Record:
    deadline = asyncio.get_running_loop().time() + WAIT_S
    while True:
        found = await _row(pool, job_id)
        if found["state"] == state:
            return found
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{job_id} stayed {found['state']}, never {state}")
        await asyncio.sleep(0.05)


async def test_a_sigkilled_workers_job_is_redelivered_and_its_final_attempt_buried(
    pg_pool: Any, pg_dsn: str
) -> None:
    driver = postgres_driver(pg_pool)
    again = (await driver.enqueue(sticky.request({"n": 1}))).id
    final = (await driver.enqueue(doomed.request({"n": 1}))).id
    first = await WorkerProcess.spawn(pg_dsn, "--worker-id", "first")
    await first.started(again)
    await first.started(final)
    first.kill(signal.SIGKILL)
    assert await first.exit_code() == -signal.SIGKILL
    second = await WorkerProcess.spawn(pg_dsn, "--worker-id", "second")
    try:
        done = await _until_state(pg_pool, again, "done")
        assert done["attempt"] == 2  # re-delivered after the visibility timeout
        started = await second.started(again)
        assert started["attempt"] == 2
        buried = await _until_state(pg_pool, final, "dead")
        assert (buried["attempt"], buried["last_error"]) == (1, LEASE_LAPSED_FINAL_ATTEMPT)
        assert not any(e.get("job_id") == final for e in second.lines)  # never handed out
    finally:
        second.kill(signal.SIGTERM)
    assert await second.exit_code() == 0
    assert "jobs.claim.exhausted" in await second.stderr()


async def test_a_parent_waiting_on_children_survives_its_workers_sigkill(
    pg_pool: Any, pg_dsn: str
) -> None:
    """The parent is parked (suspended, no process) while its children hang in the worker; the
    worker dies; the next worker re-runs the children, the last one wakes the parent, and the
    parent resumes from its stored steps and gets every child's result."""
    driver = postgres_driver(pg_pool)
    parent = (await driver.enqueue(gatherer.request({"n": 1}))).id
    first = await WorkerProcess.spawn(pg_dsn, "--worker-id", "first")
    await _until_state(pg_pool, parent, "suspended")
    await first.until(
        lambda _: (
            sum(e["event"] == "started" and e["job"] == "sticky_child" for e in first.lines) == 3
        )
    )
    first.kill(signal.SIGKILL)
    assert await first.exit_code() == -signal.SIGKILL
    second = await WorkerProcess.spawn(pg_dsn, "--worker-id", "second")
    try:
        await _until_state(pg_pool, parent, "done")
        assert await pg_pool.fetchval("select result from x_jobs where id = $1", parent) == "12"
        children = await pg_pool.fetch(
            "select state, attempt from x_jobs where parent_id = $1", parent
        )
        assert [(r["state"], r["attempt"]) for r in children] == [("done", 2)] * 3
        resumed = await second.started(parent)
        assert resumed["attempt"] == 1  # a suspension spends no attempt; the replay enqueued none
    finally:
        second.kill(signal.SIGTERM)
    assert await second.exit_code() == 0


async def test_sigterm_hands_a_running_job_back_uncounted_and_exits_zero(
    pg_pool: Any, pg_dsn: str
) -> None:
    driver = postgres_driver(pg_pool)
    job_id = (await driver.enqueue(cooperative.request({"n": 1}))).id
    worker = await WorkerProcess.spawn(pg_dsn)
    await worker.started(job_id)
    worker.kill(signal.SIGTERM)
    assert await worker.exit_code() == 0
    row = await _row(pg_pool, job_id)
    assert (row["state"], row["attempt"]) == ("ready", 0)
    assert (await worker.until(lambda e: e["event"] == "exited"))["state"] == "stopped"


async def test_a_body_that_ignores_the_signal_is_abandoned_at_the_deadline(
    pg_pool: Any, pg_dsn: str
) -> None:
    driver = postgres_driver(pg_pool)
    job_id = (await driver.enqueue(stubborn.request({"n": 1}))).id
    worker = await WorkerProcess.spawn(pg_dsn, "--deadline-ms", "500")
    await worker.started(job_id)
    worker.kill(signal.SIGTERM)
    assert await worker.exit_code() == 0
    assert "jobs.worker.drain-abandoned" in await worker.stderr()
    row = await _row(pg_pool, job_id)
    assert (row["state"], row["attempt"]) == ("running", 1)  # its lease lapses on its own
