"""The Redis driver under a storm: ``ujobs worker --driver redis`` processes on a PRIVATE
redis-server, a load enqueuing through ``redis_driver``, and redis-server SIGKILLed and started
again ``restarts`` times (plus a worker SIGKILL between restarts). The ledger stays in the
storm's Postgres.

``aof=False`` is a Redis without persistence: a restart comes back EMPTY, and every job it held
(ready, running, or its steps) is gone — what the README states, measured here. ``aof=True``
is ``appendonly yes`` with ``appendfsync everysec``: a SIGKILL may lose the last second of
writes. ``lost``: an acknowledged enqueue whose body never recorded its end.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import asyncpg
from redis.asyncio import Redis

from tests.chaos import storm_app
from tests.chaos.fleet import Fleet, Role, service_env
from tests.chaos.harness import fresh_database
from tests.support.restartable import PrivatePostgres, PrivateRedis
from ujobs.drivers.redis import redis_driver

PREFIX = "storm"
ENDED = "select distinct job_id from storm_ledger where step = 'end'"
ENDS_TWICE = (
    "select job_id, array_agg(pid order by at_ms) as pids from storm_ledger where step = 'end'"
    " group by job_id having count(*) > 1"
)


async def redis_storm(
    pg: PrivatePostgres,
    logs: Path,
    *,
    aof: bool,
    budget_s: float = 20.0,
    restarts: int = 2,
    rate_per_s: float = 20.0,
    drain_s: float = 30.0,
) -> dict[str, Any]:
    name = "aof" if aof else "noaof"
    url = await fresh_database(pg, f"storm_redis_{name}")
    pool = await asyncpg.create_pool(url, min_size=1, max_size=4)
    logs = logs / f"redis-{name}"
    logs.mkdir(parents=True, exist_ok=True)
    fleet = Fleet(logs)
    acked: list[str] = []
    errors = 0
    exits: list[str] = []
    """Workers that exited without a kill (started again): a finding when not empty."""
    stopping = asyncio.Event()
    with PrivateRedis(aof=aof) as server:
        env = service_env(
            url, REDIS_URL=server.url, UJOBS_DRIVER="redis", UJOBS_REDIS_PREFIX=PREFIX
        )
        env.pop("DATABASE_URL")
        worker = Role("worker", ("worker", "--queues", "default"), env)
        client = Redis.from_url(server.url)
        driver = redis_driver(client, prefix=PREFIX)

        async def load() -> None:
            nonlocal errors
            n = 0
            while not stopping.is_set():
                request = storm_app.work.request(
                    {"src": f"redis-{name}", "n": n, "at_ms": int(time.time() * 1000)}
                )
                n += 1
                try:
                    acked.append((await driver.enqueue(request)).id)
                except Exception:  # redis-server down: not acknowledged
                    errors += 1
                await asyncio.sleep(1 / rate_per_s)

        try:
            for _ in range(2):
                fleet.start(worker)
            loader = asyncio.create_task(load())
            for i in range(restarts):
                await asyncio.sleep(budget_s / (restarts + 1))
                exits += [gone.label for gone in fleet.reap()]
                alive = fleet.alive("worker")
                fleet.kill_and_replace(alive[i % len(alive)])
                await asyncio.sleep(0.5)
                await asyncio.to_thread(server.restart, kill=True)
            await asyncio.sleep(budget_s / (restarts + 1))
            stopping.set()
            await loader
            deadline = time.monotonic() + drain_s
            ended: set[str] = set()
            while time.monotonic() < deadline:
                ended = {r["job_id"] for r in await pool.fetch(ENDED)}
                if ended.issuperset(acked):
                    break
                await asyncio.sleep(0.5)
            twice = [(r["job_id"], list(r["pids"])) for r in await pool.fetch(ENDS_TWICE)]
        finally:
            fleet.stop_all()
            await driver.close()
            await client.aclose()
            await pool.close()
    lost = [job_id for job_id in acked if job_id not in ended]
    return {
        f"redis_{name}_acked": len(acked),
        f"redis_{name}_lost": len(lost),
        f"redis_{name}_bodies_ended_twice": len(twice),
        f"redis_{name}_bodies_ended_twice_ids": twice[:10],
        f"redis_{name}_lost_ids": lost[:10],
        f"redis_{name}_restarts": restarts,
        f"redis_{name}_enqueue_errors": errors,
        f"redis_{name}_exits": exits,
    }
