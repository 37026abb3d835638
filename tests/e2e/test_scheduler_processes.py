"""Two ``ujobs scheduler`` OS processes against one Postgres.

The leader is SIGKILLed mid-round; the standby takes over once the lease's TTL passes and, with
``run-all``, fires what the dead leader left — every occurrence in the window exactly once.
Then a leader frozen with SIGSTOP past its TTL is demoted at its next acquire when it thaws.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import asyncpg
import pytest

if TYPE_CHECKING:
    Pool = asyncpg.Pool[Any]

ROOT = Path(__file__).resolve().parents[2]
APP = "tests.support.scheduler_app:api"
ENTRIES = 5
TTL_MS = 3_000

pytestmark = pytest.mark.slow


class Scheduler:
    """One ``ujobs scheduler`` process, its stderr (JSON log lines) kept in a file."""

    def __init__(self, dsn: str, log: Path, extra_env: dict[str, str] | None = None) -> None:
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "DATABASE_URL": dsn,
            "UJOBS_APP": APP,
            "UJOBS_SCHEDULER_LEASE_TTL_MS": str(TTL_MS),
            "UJOBS_DRAIN_DEADLINE_MS": "5000",
            "UJOBS_METRICS_PORT": "0",
            "E2E_ENTRIES": str(ENTRIES),
            **(extra_env or {}),
        }
        self.log = log
        self._stderr: IO[bytes] = log.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ujobs.services.cli", "scheduler"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=self._stderr,
        )

    @property
    def holder_prefix(self) -> str:
        return f"{socket.gethostname()}:{self.proc.pid}:"

    def logged(self, event: str) -> bool:
        return f'"event":"{event}"' in self.log.read_text(errors="replace")

    def signal(self, signum: signal.Signals) -> None:
        self.proc.send_signal(signum)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._stderr.close()


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Any]:
    started: list[Scheduler] = []

    def start(dsn: str, name: str, extra_env: dict[str, str] | None = None) -> Scheduler:
        process = Scheduler(dsn, tmp_path / f"{name}.log", extra_env)
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop()


@pytest.fixture
async def pool(pg_dsn: str) -> AsyncIterator[Pool]:
    created = await asyncpg.create_pool(pg_dsn, min_size=1, max_size=2)
    assert created is not None
    yield created
    await created.close()


async def until(check: Any, what: str, timeout_s: float = 30.0) -> Any:
    """Poll ``check()`` (sync or async) until it answers something truthy."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


async def lease_holder(pool: Pool) -> str | None:
    row = await pool.fetchrow(
        "select holder from x_job_leases where key = 'scheduler' and expires_at > now()"
    )
    return None if row is None else str(row["holder"])


async def fired(pool: Pool) -> dict[int, int]:
    rows = await pool.fetch(
        "select (input->>'occurrence_ms')::bigint as occ, count(*) as n from x_jobs "
        "where name = 'e2e-tick' group by 1 order by 1"
    )
    return {int(r["occ"]): int(r["n"]) for r in rows}


def assert_every_occurrence_once(counts: dict[int, int]) -> list[int]:
    occurrences = sorted(counts)
    assert occurrences, "nothing fired"
    assert all(n == ENTRIES for n in counts.values()), counts
    gaps = [b - a for a, b in itertools.pairwise(occurrences) if b - a != 1_000]
    assert gaps == [], f"missing occurrences between {occurrences[0]} and {occurrences[-1]}"
    return occurrences


def wait_exit(process: Scheduler, timeout_s: float = 15.0) -> int:
    return process.proc.wait(timeout_s)


async def test_a_leader_killed_mid_round_leaves_no_occurrence_unfired_or_doubled(
    pg_dsn: str, pool: Pool, spawn: Any, tmp_path: Path
) -> None:
    markers = tmp_path / "markers"
    markers.mkdir()
    leader = spawn(pg_dsn, "leader", {"E2E_MARKER_DIR": str(markers), "E2E_ROUND_SLEEP_S": "0.4"})
    await until(lambda: _holder_is(pool, leader), "the first process to lead", timeout_s=60)
    standby = spawn(pg_dsn, "standby")
    await until(lambda: standby.logged("jobs.scheduler.started"), "the standby to start", 60)
    await until(lambda: len(list(markers.iterdir())) >= 4, "a few rounds on the leader")
    # Kill it in the middle of a round: the moment a new marker appears, it is building that
    # occurrence's jobs and has not yet sent the fire.
    seen = set(markers.iterdir())
    new = await until(lambda: set(markers.iterdir()) - seen, "the leader's next round")
    leader.signal(signal.SIGKILL)
    killed_at = int(next(iter(new)).name.split("-")[1])
    assert leader.proc.wait(10) == -signal.SIGKILL
    assert killed_at not in await fired(pool)  # the round died before its statement

    # The standby takes the lease once the TTL passes and fires what was left, in order.
    await until(lambda: _holder_is(pool, standby), "the standby to take over", TTL_MS / 1000 + 10)
    took_over_ms = int(time.time() * 1000)
    await until(lambda: _fired_through(pool, took_over_ms + 2_000), "the standby to go on", 20)
    standby.signal(signal.SIGTERM)
    assert wait_exit(standby) == 0
    assert standby.logged("jobs.scheduler.stopped")
    assert await lease_holder(pool) is None  # a clean drain hands the lease back

    occurrences = assert_every_occurrence_once(await fired(pool))
    assert killed_at in occurrences
    assert occurrences[-1] >= took_over_ms + 2_000


async def test_a_frozen_leader_is_demoted_at_its_next_acquire(
    pg_dsn: str, pool: Pool, spawn: Any
) -> None:
    first = spawn(pg_dsn, "first")
    await until(lambda: _holder_is(pool, first), "the first process to lead", timeout_s=60)
    second = spawn(pg_dsn, "second")
    await until(lambda: second.logged("jobs.scheduler.started"), "the second to start", 60)
    await until(lambda: _fired_count_at_least(pool, 2), "a few fires")
    first.signal(signal.SIGSTOP)
    await until(lambda: _holder_is(pool, second), "the second to take over", TTL_MS / 1000 + 10)
    took_over_at = max(await fired(pool))
    await until(lambda: _fired_through(pool, took_over_at + 2_000), "the second to fire", 10)
    first.signal(signal.SIGCONT)
    await until(lambda: first.logged("jobs.scheduler.demoted"), "the first to learn it", 10)
    assert await _holder_is(pool, second)
    for process in (first, second):
        process.signal(signal.SIGTERM)
    assert wait_exit(first) == 0
    assert wait_exit(second) == 0
    assert_every_occurrence_once(await fired(pool))


async def _holder_is(pool: Pool, process: Scheduler) -> bool:
    holder = await lease_holder(pool)
    return holder is not None and holder.startswith(process.holder_prefix)


async def _fired_through(pool: Pool, occurrence: int) -> bool:
    counts = await fired(pool)
    return bool(counts) and max(counts) >= occurrence


async def _fired_count_at_least(pool: Pool, count: int) -> bool:
    return len(await fired(pool)) >= count
