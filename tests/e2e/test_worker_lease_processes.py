"""Issue 30, with real worker processes on Postgres: a worker frozen (SIGSTOP) past its lease
starts no new step when it resumes."""

from __future__ import annotations

import signal
from typing import Any

import pytest

from shared.drivers.postgres import postgres_driver
from tests.e2e.test_worker_processes import WorkerProcess, _until_state
from tests.e2e.worker_app import two_steps

pytestmark = pytest.mark.slow

WINDOW_MS = "3000"


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
    # The frozen worker's heartbeat is due 2.5 s after its claim, its body's pause ends after
    # 1 s: resumed, the body's timer fires first, so only the step's own guard can stop `b`.
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
        assert halted["error"] == "JobAbortedError"  # refused at the step, not at the save
    finally:
        frozen.kill(signal.SIGCONT)
        frozen.kill(signal.SIGTERM)
        other.kill(signal.SIGTERM)
    assert await frozen.exit_code() == 0
    assert await other.exit_code() == 0
    assert "jobs.lease.lost" in await frozen.stderr()
    run_id = await pg_pool.fetchval("select run_id from x_jobs where id = $1", job_id)
    assert [s.name for s in await driver.load_steps(run_id)] == ["a", "b"]
