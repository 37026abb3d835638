"""Recovery after crashes and restarts (issue 30): ONE JSON line of four figures.

Every server here is PRIVATE (``tests/support/restartable.py``): a Postgres ``initdb``-ed into
a temporary directory with the installed major version's binaries, and ``redis-server``, each
on a free port. The workers are real ``ujobs worker`` processes running ``recovery_app.py``.

* ``pg_restart_recovery_s`` (target <= 5): ``jobs`` sleep jobs under ``workers`` workers;
  Postgres is restarted (fast shutdown, start) once a fifth are done; the seconds from Postgres
  accepting connections again until every row that was ``running`` at the restart is settled
  or claimed anew.
* ``frozen_worker_steps_after_lease`` (target 0): a worker in the gap between steps ``a`` and
  ``b`` is SIGSTOPped past its lease, another worker completes the jobs, the first is resumed:
  the steps it STARTED after that (their side effect ran).
* ``claim_ahead_attempts_burnt`` (target 0): a worker with one slot and a full claim-ahead
  buffer is SIGKILLed, another drains the queue: the attempts counted on rows the killed
  worker held but never started.
* ``redis_aof_restart_lost`` (target 0): ``jobs`` enqueued on the Redis driver, redis-server
  (AOF, ``appendfsync everysec``) restarted cleanly: the jobs missing after it. Beside it,
  ``redis_aof_kill_lost``: the same with a SIGKILL right after the last enqueue answered (up
  to a second of writes is what ``everysec`` risks).

Each is a function (``pg_restart_recovery``, ``frozen_worker_steps``, ``claim_ahead_burnt``,
``redis_aof_restart``) that a test runs in a small form. Run:
``.venv/bin/python bench/recovery.py`` (``RECOVERY_JOBS``, ``RECOVERY_WORKERS`` to change the
load); the figures go to ``bench/RESULTS.md`` by hand.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for _path in (str(ROOT), str(HERE)):
    if _path not in sys.path:
        sys.path.insert(0, _path)

import asyncpg  # noqa: E402
import recovery_app  # noqa: E402
from redis.asyncio import Redis  # noqa: E402

from tests.support.restartable import PrivatePostgres, PrivateRedis  # noqa: E402
from ujobs.drivers.postgres import postgres_driver  # noqa: E402
from ujobs.drivers.postgres.migrate import migrate  # noqa: E402
from ujobs.drivers.postgres.pool import postgres_pool  # noqa: E402
from ujobs.drivers.redis import redis_driver  # noqa: E402

UJOBS = Path(sys.executable).parent / "ujobs"
POLL_S = 0.02
LEASE_MS = 3_000
"""The lease of the frozen-worker and claim-ahead runs: short, so a lapse takes seconds."""


# -- processes ------------------------------------------------------------------------------


def worker_env(database_url: str, marks: Path, **settings: str) -> dict[str, str]:
    """The environment of one ``ujobs worker``: ours only (no inherited ``UJOBS_*``); its
    jobs' marks go to ``marks``."""
    keep = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("UJOBS_") and k not in ("DATABASE_URL", "REDIS_URL", "NATS_URL")
    }
    return {
        **keep,
        "PYTHONPATH": os.pathsep.join([str(HERE), str(ROOT)]),
        "DATABASE_URL": database_url,
        "RECOVERY_MARKS_DIR": str(marks),
        "UJOBS_APP": "recovery_app:api",
        "UJOBS_DRIVER": "postgres",
        "UJOBS_LOG_LEVEL": "warning",
        **settings,
    }


@dataclass
class Fleet:
    """The ``ujobs worker`` processes of one measurement; each logs to its own file."""

    logs: Path
    procs: list[subprocess.Popen[bytes]]

    def start(self, env: dict[str, str]) -> subprocess.Popen[bytes]:
        log = (self.logs / f"worker-{len(self.procs)}.log").open("wb")
        proc = subprocess.Popen(
            [str(UJOBS), "worker", "--queues", "default"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        self.procs.append(proc)
        return proc

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)  # a frozen one cannot drain
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@contextmanager
def fleet(logs: Path) -> Iterator[Fleet]:
    workers = Fleet(logs, [])
    try:
        yield workers
    finally:
        workers.stop()


# -- the database ---------------------------------------------------------------------------


async def fresh_database(pg: PrivatePostgres, name: str) -> str:
    """A new database ``name`` in ``pg``, migrated; answers its URL."""
    admin = await asyncpg.connect(pg.url)
    try:
        await admin.execute(f'drop database if exists "{name}"')
        await admin.execute(f'create database "{name}"')
    finally:
        await admin.close()
    url = pg.url.rsplit("/", 1)[0] + f"/{name}"
    conn = await asyncpg.connect(url)
    try:
        await migrate(conn)
    finally:
        await conn.close()
    return url


async def fetchval(url: str, sql: str, *args: Any) -> Any:
    """One value on a connection of its own (the server may have restarted since the last)."""
    conn = await asyncpg.connect(url)
    try:
        return await conn.fetchval(sql, *args)
    finally:
        await conn.close()


async def fetch(url: str, sql: str, *args: Any) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(url)
    try:
        return list(await conn.fetch(sql, *args))
    finally:
        await conn.close()


async def enqueue(url: str, requests: list[Any]) -> None:
    pool = await postgres_pool(url, min_size=1, max_size=2)
    try:
        driver = postgres_driver(pool)
        for i in range(0, len(requests), 1_000):
            await driver.enqueue_many(requests[i : i + 1_000])
    finally:
        await pool.close()


async def wait_until(check: Callable[[], Awaitable[bool]], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not await check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout_s:.0f}s")
        await asyncio.sleep(POLL_S)


def marks_dir(logs: Path, name: str) -> Path:
    path = logs / f"marks-{name}"
    path.mkdir(parents=True, exist_ok=True)
    return path


def read_marks(path: Path) -> list[dict[str, Any]]:
    """Every step start the workers wrote under ``path`` (``recovery_app.mark``)."""
    return [
        json.loads(line)
        for file in sorted(path.glob("*.jsonl"))
        for line in file.read_text(encoding="utf-8").splitlines()
        if line
    ]


async def count_state(url: str, state: str) -> int:
    return int(await fetchval(url, "select count(*) from x_jobs where state = $1", state))


# -- 1. a Postgres restart under load -------------------------------------------------------

STILL_HELD = """
select count(*) from x_jobs j
  join unnest($1::text[], $2::int[]) as h(id, claim) on j.id = h.id
 where j.state = 'running' and j.claim = h.claim
"""


async def pg_restart_recovery(
    pg: PrivatePostgres,
    logs: Path,
    *,
    jobs: int,
    workers: int,
    concurrency: int = 8,
    body_ms: int = 50,
    timeout_s: float = 60.0,
) -> dict[str, Any]:
    """Seconds from Postgres accepting connections after a restart until every row held at
    the restart is settled or claimed anew (``None``: not within ``timeout_s``)."""
    url = await fresh_database(pg, "recovery_restart")
    requests = [recovery_app.sleep_job.request({"n": n, "ms": body_ms}) for n in range(jobs)]
    await enqueue(url, requests)
    env = worker_env(url, marks_dir(logs, "restart"), UJOBS_CONCURRENCY=str(concurrency))
    with fleet(logs) as procs:
        for _ in range(workers):
            procs.start(env)

        async def a_fifth_done() -> bool:
            return await count_state(url, "done") >= jobs // 5

        await wait_until(a_fifth_done, 120, "a fifth of the jobs done")
        held = await fetch(url, "select id, claim from x_jobs where state = 'running'")
        ids, claims = [r["id"] for r in held], [r["claim"] for r in held]
        await asyncio.to_thread(pg.restart)
        while True:  # the first connection that succeeds is "accepting connections"
            try:
                await fetchval(url, "select 1")
                break
            except (OSError, asyncpg.PostgresError):
                await asyncio.sleep(0.005)
        back = time.monotonic()
        recovery: float | None = None
        while time.monotonic() - back < timeout_s:
            if await fetchval(url, STILL_HELD, ids, claims) == 0:
                recovery = time.monotonic() - back
                break
            await asyncio.sleep(POLL_S)

        async def all_done() -> bool:
            return await count_state(url, "done") == jobs

        await wait_until(all_done, 120, "every job done")
    return {
        "pg_restart_recovery_s": None if recovery is None else round(recovery, 2),
        "pg_restart_held_rows": len(held),
        "pg_restart_jobs_done": await count_state(url, "done"),
    }


# -- 2. a worker frozen past its lease --------------------------------------------------------


async def frozen_worker_steps(pg: PrivatePostgres, logs: Path, *, jobs: int = 3) -> dict[str, Any]:
    """Steps a SIGSTOPped worker started after it was resumed past its lease."""
    url = await fresh_database(pg, "recovery_frozen")
    requests = [recovery_app.steps_job.request({"n": n, "gap_ms": 150}) for n in range(jobs)]
    await enqueue(url, requests)
    marks = marks_dir(logs, "frozen")
    env = worker_env(
        url,
        marks,
        UJOBS_CONCURRENCY=str(jobs),
        UJOBS_CLAIM_AHEAD="0",
        UJOBS_VISIBILITY_TIMEOUT_MS=str(LEASE_MS),
    )
    with fleet(logs) as procs:
        frozen = procs.start(env)

        async def in_the_gap() -> bool:  # every body between steps a and b
            gaps = [m for m in read_marks(marks) if m["step"] == "gap"]
            return len(gaps) == jobs

        await wait_until(in_the_gap, 60, "the first worker between steps a and b")
        frozen.send_signal(signal.SIGSTOP)
        stopped = time.monotonic()
        procs.start(env)

        async def all_done() -> bool:
            return await count_state(url, "done") == jobs

        await wait_until(all_done, 60, "the second worker completing the jobs")
        await asyncio.sleep(max(0.0, stopped + LEASE_MS / 1000 + 1 - time.monotonic()))
        resumed = time.time()
        frozen.send_signal(signal.SIGCONT)
        await asyncio.sleep(3)  # its gap is long over: whatever it does next, it does now
    after = [
        m
        for m in read_marks(marks)
        if m["pid"] == frozen.pid and m["at"] >= resumed and m["step"] != "gap"
    ]
    return {"frozen_worker_steps_after_lease": len(after), "frozen_worker_jobs": jobs}


# -- 3. a SIGKILL with a full claim-ahead buffer ----------------------------------------------


async def claim_ahead_burnt(pg: PrivatePostgres, logs: Path, *, ahead: int = 4) -> dict[str, Any]:
    """Attempts counted on rows a SIGKILLed worker held in its claim-ahead buffer, never started."""
    url = await fresh_database(pg, "recovery_ahead")
    jobs = ahead + 6
    await enqueue(url, [recovery_app.held_job.request({"n": n}) for n in range(jobs)])
    marks = marks_dir(logs, "ahead")
    slow = worker_env(
        url,
        marks,
        UJOBS_CONCURRENCY="1",
        UJOBS_CLAIM_AHEAD=str(ahead),
        UJOBS_VISIBILITY_TIMEOUT_MS=str(LEASE_MS),
        RECOVERY_HELD_MS="60000",
    )
    with fleet(logs) as procs:
        doomed = procs.start(slow)

        async def buffer_full() -> bool:
            running = await count_state(url, "running")
            return running >= ahead + 1 and len(read_marks(marks)) >= 1

        await wait_until(buffer_full, 60, "the first worker's claim-ahead buffer full")
        doomed.kill()
        doomed.wait()
        held = {r["id"] for r in await fetch(url, "select id from x_jobs where state = 'running'")}
        started = {m["job_id"] for m in read_marks(marks) if m["pid"] == doomed.pid}
        procs.start(worker_env(url, marks, UJOBS_CLAIM_AHEAD="0", RECOVERY_HELD_MS="10"))

        async def all_done() -> bool:
            return await count_state(url, "done") == jobs

        await wait_until(all_done, 60, "the second worker draining the queue")
    never_started = held - started
    first: dict[str, int] = {}
    for m in read_marks(marks):
        if m["job_id"] in never_started:
            first[m["job_id"]] = min(first.get(m["job_id"], m["attempt"]), m["attempt"])
    return {
        "claim_ahead_attempts_burnt": sum(attempt - 1 for attempt in first.values()),
        "claim_ahead_rows_never_started": len(never_started),
    }


# -- 4. Redis with an append-only file, restarted ---------------------------------------------


async def redis_aof_restart(*, jobs: int, kill: bool = False) -> dict[str, Any]:
    """Jobs missing after a restart of redis-server with ``appendfsync everysec`` (``kill``:
    SIGKILL right after the last enqueue answered, instead of a clean shutdown)."""
    with PrivateRedis(aof=True, appendfsync="everysec") as server:
        client = Redis.from_url(server.url)
        driver = redis_driver(client, prefix="recovery")
        try:
            requests = [recovery_app.sleep_job.request({"n": n, "ms": 1}) for n in range(jobs)]
            for i in range(0, jobs, 1_000):
                await driver.enqueue_many(requests[i : i + 1_000])
            await asyncio.to_thread(server.restart, kill=kill)
            stats = await driver.stats()
        finally:
            await driver.close()
            await client.aclose()
    kept = sum(q.ready for q in stats.queues.values())
    name = "redis_aof_kill_lost" if kill else "redis_aof_restart_lost"
    return {name: jobs - kept}


async def main() -> None:
    jobs = int(os.environ.get("RECOVERY_JOBS", "3000"))
    workers = int(os.environ.get("RECOVERY_WORKERS", "3"))
    figures: dict[str, Any] = {}
    with PrivatePostgres() as pg:
        logs = pg.workdir / "logs"
        logs.mkdir()
        figures |= await pg_restart_recovery(pg, logs, jobs=jobs, workers=workers)
        figures |= await frozen_worker_steps(pg, logs)
        figures |= await claim_ahead_burnt(pg, logs)
    figures |= await redis_aof_restart(jobs=jobs)
    figures |= await redis_aof_restart(jobs=jobs, kill=True)
    print(json.dumps({**figures, "jobs": jobs, "workers": workers}))


if __name__ == "__main__":
    from harness_run import bench_lock

    with bench_lock():
        asyncio.run(main())
