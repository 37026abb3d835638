"""Outbound webhooks: what one deliverer process delivers, beside the HTTP ceiling. ONE JSON line.

(Named ``webhook_deliveries`` and not ``webhooks``: a ``bench/webhooks.py`` would shadow the
``webhooks`` package for mypy and for ``python bench/...``, whose folder comes first on the path.)

    .venv/bin/python bench/webhook_deliveries.py
    BENCH_WEBHOOKS_N=2000 .venv/bin/python bench/webhook_deliveries.py

What it measures, against a local aiohttp receiver running in its own process:

- ``deliveries_per_s``: ``BENCH_WEBHOOKS_N`` (10,000) signed deliveries, queued while the
  ``webhooks`` queue is paused (events stored, one delivery job each, spread over 16 endpoints),
  then the queue resumed: from the resume to the receipt of the last one, delivered by ONE
  ``ujobs webhook-deliverer`` process (``UJOBS_CONCURRENCY`` = ``BENCH_WEBHOOKS_CONCURRENCY``,
  default 32) on Postgres with the Redis wake.
- ``raw_posts_per_s``: a bare aiohttp client POSTing the same signed bodies and headers at the
  same concurrency to the same receiver: the HTTP ceiling of this machine.
- ``delivery_p50_ms`` / ``delivery_p95_ms``: ``BENCH_WEBHOOKS_LAT_N`` (200) events published one
  at a time (``ujobs.webhooks.builtin.publish``: the event row, then the delivery's enqueue with its
  wake) to one endpoint, from the call to the receipt (both clocks are this machine's).
- ``deliverer_cpu_ms_per_delivery`` (the deliverer process's user + system CPU over the
  throughput phase, per delivery) beside ``client_cpu_ms_per_raw_post`` (the bare client's):
  what each costs the machine, the figure a loaded machine moves least.
- ``ratios.deliveries_vs_raw_posts``. Targets: ``>= 0.5``, and ``delivery_p50_ms < 10``.
- The floor under that ratio, measured last in the same run by a second deliverer process, the
  same settings plus ``UJOBS_APP`` (``bench/webhook_floor_app.py``): ``floor_jobs_per_s``,
  ``N`` no-op durable jobs on the ``webhooks`` queue (claim, run, settle; no POST), and
  ``floor_slot_jobs_per_s``, the same holding a per-endpoint slot as a delivery does (16 keys,
  the deliveries' cap), each beside its deliverer CPU per job. ``ratios.floor_jobs_vs_raw_posts``
  and ``ratios.floor_slot_jobs_vs_raw_posts`` bound ``deliveries_vs_raw_posts`` on this
  machine: a delivery is a slotted job plus a signed POST in the same slot, so at the same
  concurrency it reaches at best ``ceiling_deliveries_per_s`` = 1 / (1 / floor_slot + 1 / raw)
  (``ratios.ceiling_vs_raw_posts``; ``ratios.deliveries_vs_ceiling`` is how near it comes).
  Without the slot, a no-op durable job plus the POST, ``ceiling_unslotted_deliveries_per_s``
  = 1 / (1 / floor + 1 / raw) (``ratios.ceiling_unslotted_vs_raw_posts``): what ONE process
  could deliver if the per-endpoint cap cost nothing at all, the bound on the 0.5 target a
  delivery's being a durable job sets on this machine.
- ``commits_per_delivery``, ``commits_per_floor_job``, ``commits_per_floor_slot_job``: the bench
  database's committed transactions over each phase (``pg_stat_database.xact_commit``, read
  ``STATS_FLUSH_S`` after it ends), per delivery or job: every statement the deliverer sends
  outside a transaction is one, so this counts round trips that commit, the figure a busy
  machine does not move (it includes the deliverer's few idle polls in those seconds).

Before each timed phase the bench runs ``ANALYZE`` (``analyze``), as a deployment's autovacuum
would by then; ``BENCH_WEBHOOKS_ANALYZE=0`` leaves the plans the deliverer made on empty tables.

``UJOBS_EVENT_LOOP`` and ``UJOBS_CLAIM_AHEAD``, when set, reach both deliverer processes (no
other ``UJOBS_*`` variable of the shell does). ``BENCH_WEBHOOKS_PROFILE=/tmp/d.prof`` runs the
deliverer under cProfile;
``BENCH_WEBHOOKS_POOL`` (12) is its ``UJOBS_PG_POOL_SIZE``.

Postgres is ``BENCH_DATABASE_URL`` (default the local server's ``postgres`` database): a
database of its own is created, migrated and dropped. Redis is ``REDIS_URL`` (default local).
Runs under the bench lock (``bench/harness_run.py``), so no other bench of ours overlaps it.
Figures are noisy on a shared 2-core machine: compare the ratio within one line.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import aiohttp  # noqa: E402
import asyncpg  # noqa: E402
import webhook_floor_app  # noqa: E402
from aiohttp import web  # noqa: E402
from harness_run import bench_lock  # noqa: E402
from redis.asyncio import Redis  # noqa: E402

from ujobs.drivers.postgres import postgres_driver  # noqa: E402
from ujobs.drivers.postgres.migrate import migrate  # noqa: E402
from ujobs.drivers.postgres.sql import query  # noqa: E402
from ujobs.introspect import pause_queues  # noqa: E402
from ujobs.jobs.enqueue_target import reset_job_driver, set_job_driver  # noqa: E402
from ujobs.wake.announce import announcing, redis_announcer  # noqa: E402
from ujobs.webhooks import builtin  # noqa: E402
from ujobs.webhooks.family import WEBHOOKS_QUEUE, fan_out_inputs  # noqa: E402
from ujobs.webhooks.secrets import SecretBox  # noqa: E402
from ujobs.webhooks.signature import standard_headers  # noqa: E402
from ujobs.webhooks.ssrf import GuardPolicy  # noqa: E402
from ujobs.webhooks.store_pg import PgWebhookStore  # noqa: E402

N = int(os.environ.get("BENCH_WEBHOOKS_N", "10000"))
CONCURRENCY = int(os.environ.get("BENCH_WEBHOOKS_CONCURRENCY", "32"))
LAT_N = int(os.environ.get("BENCH_WEBHOOKS_LAT_N", "200"))
ENDPOINTS = 16
ADMIN_DSN = os.environ.get("BENCH_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
KEY = base64.b64encode(os.urandom(32)).decode()
LOCAL = GuardPolicy.parse("127.0.0.1/32", allow_http=True)
BODY = json.dumps({"type": "bench.tick", "data": {"order": "ord_0001", "total": "12.50"}})
WAIT_S = 300.0
STATS_FLUSH_S = 11.0
"""A backend's counters reach ``pg_stat_database`` within Postgres's idle flush interval (10 s),
so the commit counts read this long after a phase hold every commit of it."""
ANALYZE = os.environ.get("BENCH_WEBHOOKS_ANALYZE", "1") != "0"
PASSED = frozenset({"UJOBS_EVENT_LOOP", "UJOBS_CLAIM_AHEAD"})
"""The only ``UJOBS_*`` variables of this shell the deliverers see (for paired runs); the
others are this bench's own settings."""


# --- the receiver (its own process) -----------------------------------------------------------


def receive() -> None:
    """``bench/webhook_deliveries.py receive``: count POSTs, answer /stats and /wait/<event id>."""
    arrived: dict[str, int] = {}
    waiting: dict[str, asyncio.Event] = {}
    stats = {"count": 0, "last_ns": 0}

    async def hook(request: web.Request) -> web.Response:
        await request.read()
        now = time.time_ns()
        event = request.headers.get("webhook-id", "")
        stats["count"] += 1
        stats["last_ns"] = now
        if event.startswith("lat_"):
            arrived[event] = now
            found = waiting.pop(event, None)
            if found is not None:
                found.set()
        return web.Response(status=204)

    async def read_stats(request: web.Request) -> web.Response:
        return web.json_response(stats)

    async def reset(request: web.Request) -> web.Response:
        stats.update(count=0, last_ns=0)
        return web.json_response(stats)

    async def wait(request: web.Request) -> web.Response:
        event = request.match_info["event"]
        if event not in arrived:
            waiting.setdefault(event, asyncio.Event())
            await asyncio.wait_for(waiting[event].wait(), 30)
        return web.json_response({"at_ns": arrived[event]})

    app = web.Application()
    app.router.add_post("/hook/{n}", hook)
    app.router.add_get("/stats", read_stats)
    app.router.add_post("/reset", reset)
    app.router.add_get("/wait/{event}", wait)

    async def serve() -> None:
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, backlog=1024)
        await site.start()
        server: Any = site._server
        print(server.sockets[0].getsockname()[1], flush=True)
        await asyncio.Event().wait()

    asyncio.run(serve())


# --- the run ----------------------------------------------------------------------------------


def dsn_for(database: str) -> str:
    head, _, _ = ADMIN_DSN.rpartition("/")
    return f"{head}/{database}"


async def admin(statement: str) -> None:
    conn = await asyncpg.connect(ADMIN_DSN)
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


def start_deliverer(dsn: str, log: Path, *, app: str | None = None) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("UJOBS_") or k in PASSED}
    if app is not None:
        env["UJOBS_APP"] = app
    env.update(
        DATABASE_URL=dsn,
        REDIS_URL=REDIS_URL,
        PYTHONPATH=f"{ROOT}{os.pathsep}{ROOT / 'bench'}",
        UJOBS_SECRET_KEY=KEY,
        UJOBS_WEBHOOK_ALLOW_PRIVATE="127.0.0.1/32",
        UJOBS_WEBHOOK_ALLOW_HTTP="1",
        UJOBS_CONCURRENCY=str(CONCURRENCY),
        UJOBS_PG_POOL_SIZE=os.environ.get("BENCH_WEBHOOKS_POOL", "12"),
        UJOBS_METRICS_PORT="0",  # the default port may be another service's on this host
    )
    profile = os.environ.get("BENCH_WEBHOOKS_PROFILE") if app is None else None
    head = [sys.executable, "-m", "cProfile", "-o", profile] if profile else [sys.executable]
    return subprocess.Popen(
        [*head, "-m", "ujobs.services.cli", "webhook-deliverer"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=log.open("wb"),
    )


def until_started(log: Path, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while b"ujobs.service.started" not in log.read_bytes():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the deliverer did not start: {log.read_text()[-2000:]}")
        time.sleep(0.1)


async def receiver_count(http: aiohttp.ClientSession, base: str) -> dict[str, int]:
    async with http.get(f"{base}/stats") as response:
        found: dict[str, int] = await response.json()
        return found


async def until_count(http: aiohttp.ClientSession, base: str, n: int) -> int:
    deadline = time.monotonic() + WAIT_S
    while True:
        stats = await receiver_count(http, base)
        if stats["count"] >= n:
            return stats["last_ns"]
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {stats['count']} of {n} deliveries arrived")
        await asyncio.sleep(0.05)


async def analyze(pool: asyncpg.Pool[Any]) -> None:
    """What a deployment's autovacuum does as the tables grow (the shared server of these runs
    has it off): fresh statistics, which also make every session re-plan its cached statements
    over those tables at their next run. Without it the deliverer keeps the generic plans it
    made at start on empty tables — sequential scans of ``x_jobs``, ``x_job_leases`` and
    ``x_webhook_events`` that cost more with every row. ``BENCH_WEBHOOKS_ANALYZE=0`` skips it."""
    if ANALYZE:
        await pool.execute("analyze")


async def commits(pool: asyncpg.Pool[Any]) -> int:
    """The bench database's committed transactions so far, every backend's flushed."""
    await asyncio.sleep(STATS_FLUSH_S)
    value = await pool.fetchval(
        "select xact_commit from pg_stat_database where datname = current_database()"
    )
    return int(value)


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def throughput(
    bench: Bench, http: aiohttp.ClientSession, base: str, deliverer: int
) -> tuple[float, float, float]:
    """Deliveries a second, the deliverer's CPU milliseconds per delivery, and the database's
    commits per delivery (every transaction of the phase, the deliverer's polls included)."""
    pool, driver = bench.pool, bench.driver
    await pause_queues(driver, [WEBHOOKS_QUEUE], pause=True)
    now = int(time.time() * 1000)
    events = [f"evt_{i:06d}" for i in range(N)]
    await pool.executemany(
        query("webhooks_event_store"),
        [(event, None, "bench.tick", BODY.encode(), now) for event in events],
    )
    inputs = [
        item
        for i, event in enumerate(events)
        for item in fan_out_inputs(event, [(f"ep_{i % ENDPOINTS:02d}", None)])
    ]
    for start in range(0, len(inputs), 1000):
        await builtin.deliver_global.enqueue_many(inputs[start : start + 1000])
    await analyze(pool)
    await http.post(f"{base}/reset")
    commits_before = await commits(pool)
    cpu_before = cpu_s(deliverer)
    began = time.time_ns()
    await pause_queues(driver, [WEBHOOKS_QUEUE], pause=False)
    last_ns = await until_count(http, base, N)
    cpu = (cpu_s(deliverer) - cpu_before) * 1000 / N
    committed = (await commits(pool) - commits_before) / N
    return N / ((last_ns - began) / 1e9), cpu, committed


async def floor(bench: Bench, name: str, deliverer: int) -> tuple[float, float, float]:
    """No-op jobs ``name`` a second through the deliverer, its CPU milliseconds per job and
    the database's commits per job: queued while the queue is paused, timed from the resume to
    the last one's finish."""
    handle = webhook_floor_app.api.jobs[name]
    await pause_queues(bench.driver, [WEBHOOKS_QUEUE], pause=True)
    inputs = [{"n": i, "endpoint": f"ep_{i % ENDPOINTS:02d}"} for i in range(N)]
    for start in range(0, N, 1000):
        await handle.enqueue_many(inputs[start : start + 1000])
    await analyze(bench.pool)
    commits_before = await commits(bench.pool)
    cpu_before = cpu_s(deliverer)
    began = time.time()
    await pause_queues(bench.driver, [WEBHOOKS_QUEUE], pause=False)
    deadline = time.monotonic() + WAIT_S
    while True:
        row = await bench.pool.fetchrow(
            "select count(*) as done, extract(epoch from max(finished_at)) as last"
            " from x_jobs where name = $1 and state = 'done'",
            name,
        )
        assert row is not None
        if row["done"] >= N:
            cpu = (cpu_s(deliverer) - cpu_before) * 1000 / N
            committed = (await commits(bench.pool) - commits_before) / N
            return N / (float(row["last"]) - began), cpu, committed
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {row['done']} of {N} {name} jobs finished")
        await asyncio.sleep(0.05)


async def raw_posts(
    store: PgWebhookStore, http: aiohttp.ClientSession, base: str, port: int
) -> tuple[float, float]:
    """POSTs a second, and this (client) process's CPU milliseconds per POST."""
    secrets = []
    for j in range(ENDPOINTS):
        found = await store.endpoint(f"ep_{j:02d}")
        assert found is not None
        secrets.append(found[0].secrets)
    ts = int(time.time())
    bodies = [
        (
            f"http://127.0.0.1:{port}/hook/{i % ENDPOINTS}",
            {
                "content-type": "application/json",
                **standard_headers(secrets[i % ENDPOINTS], f"raw_{i:06d}", ts, BODY),
            },
        )
        for i in range(N)
    ]
    await http.post(f"{base}/reset")
    queue: asyncio.Queue[tuple[str, dict[str, str]]] = asyncio.Queue()
    for item in bodies:
        queue.put_nowait(item)
    connector = aiohttp.TCPConnector(limit=CONCURRENCY, limit_per_host=0)
    async with aiohttp.ClientSession(connector=connector) as client:

        async def worker() -> None:
            while not queue.empty():
                url, headers = queue.get_nowait()
                async with client.post(url, data=BODY.encode(), headers=headers) as response:
                    await response.read()

        began, cpu_before = time.monotonic(), time.process_time()
        await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
        elapsed, cpu = time.monotonic() - began, time.process_time() - cpu_before
    assert (await receiver_count(http, base))["count"] == N
    return N / elapsed, cpu * 1000 / N


async def latency(store: PgWebhookStore, http: aiohttp.ClientSession, base: str) -> list[float]:
    out: list[float] = []
    for i in range(LAT_N):
        began = time.time_ns()
        await builtin.publish("bench.latency", BODY, event_id=f"lat_{i:05d}", store=store)
        async with http.get(f"{base}/wait/lat_{i:05d}") as response:
            at_ns = (await response.json())["at_ns"]
        out.append((at_ns - began) / 1e6)
        await asyncio.sleep(0.02)
    return out


class Bench:
    """The database, the driver (announcing on the Redis wake) and the webhook store."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn

    async def __aenter__(self) -> Bench:
        pool = await asyncpg.create_pool(self.dsn, min_size=2, max_size=8)
        assert pool is not None
        self.pool = pool
        self.redis = Redis.from_url(REDIS_URL)
        self.announcer = redis_announcer(self.redis)
        self.driver = announcing(postgres_driver(pool), self.announcer)
        set_job_driver(self.driver)
        self.store = PgWebhookStore(pool, SecretBox.parse(KEY), policy=LOCAL)
        return self

    async def __aexit__(self, *exc: object) -> None:
        reset_job_driver()
        await self.announcer.close()
        await self.redis.aclose()
        await self.driver.close()
        await self.pool.close()


async def seed(dsn: str, base: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await migrate(conn)
    finally:
        await conn.close()
    async with Bench(dsn) as bench:
        for i in range(ENDPOINTS):
            await bench.store.add_endpoint(
                f"{base}/hook/{i}", topics=["bench.tick"], endpoint_id=f"ep_{i:02d}"
            )
        await bench.store.add_endpoint(
            f"{base}/hook/99", topics=["bench.latency"], endpoint_id="ep_lat"
        )


async def measure(dsn: str, base: str, port: int, deliverer: int) -> dict[str, Any]:
    async with Bench(dsn) as bench, aiohttp.ClientSession() as http:
        deliveries, delivery_cpu, delivery_commits = await throughput(bench, http, base, deliverer)
        raw, raw_cpu = await raw_posts(bench.store, http, base, port)
        await analyze(bench.pool)  # the 10,000 delivered rows, as autovacuum would see them
        latencies = await latency(bench.store, http, base)
    return {
        "deliveries": deliveries,
        "raw": raw,
        "latencies": latencies,
        "delivery_cpu": delivery_cpu,
        "delivery_commits": delivery_commits,
        "raw_cpu": raw_cpu,
    }


async def measure_floor(dsn: str, deliverer: int) -> dict[str, Any]:
    async with Bench(dsn) as bench:
        return {
            "floor": await floor(bench, "bench.floor", deliverer),
            "floor_slot": await floor(bench, "bench.floor_slot", deliverer),
        }


def stop(deliverer: subprocess.Popen[bytes]) -> None:
    deliverer.send_signal(signal.SIGTERM)
    deliverer.wait(timeout=60)


def run() -> dict[str, Any]:
    database = f"ujobs_bench_wh_{os.getpid()}"
    asyncio.run(admin(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)'))
    asyncio.run(admin(f'CREATE DATABASE "{database}"'))
    dsn = dsn_for(database)
    receiver = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), "receive"], stdout=subprocess.PIPE
    )
    deliverer: subprocess.Popen[bytes] | None = None
    log = Path(tempfile.mkstemp(prefix="ujobs-bench-deliverer-", suffix=".log")[1])
    try:
        assert receiver.stdout is not None
        port = int(receiver.stdout.readline())
        base = f"http://127.0.0.1:{port}"
        asyncio.run(seed(dsn, base))
        deliverer = start_deliverer(dsn, log)
        until_started(log, deliverer)
        got = asyncio.run(measure(dsn, base, port, deliverer.pid))
        stop(deliverer)
        # The floor from a second deliverer, the same but for the no-op jobs' app, so the
        # deliveries above run exactly as a deployment's deliverer does.
        deliverer = start_deliverer(dsn, log, app="webhook_floor_app:api")
        until_started(log, deliverer)
        got.update(asyncio.run(measure_floor(dsn, deliverer.pid)))
        stop(deliverer)
    finally:
        if deliverer is not None and deliverer.poll() is None:
            deliverer.kill()
        receiver.kill()
        receiver.wait()
        asyncio.run(admin(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)'))
        log.unlink(missing_ok=True)
    deliveries, raw, latencies = got["deliveries"], got["raw"], got["latencies"]
    (floor_jobs, floor_cpu, floor_commits) = got["floor"]
    (slot_jobs, slot_cpu, slot_commits) = got["floor_slot"]
    ceiling = 1 / (1 / slot_jobs + 1 / raw)
    ceiling_unslotted = 1 / (1 / floor_jobs + 1 / raw)
    quantiles = statistics.quantiles(latencies, n=20)
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    return {
        "bench": "webhooks",
        "n": N,
        "concurrency": CONCURRENCY,
        "endpoints": ENDPOINTS,
        "deliveries_per_s": round(deliveries, 1),
        "raw_posts_per_s": round(raw, 1),
        "delivery_p50_ms": round(statistics.median(latencies), 2),
        "delivery_p95_ms": round(quantiles[18], 2),
        "deliverer_cpu_ms_per_delivery": round(got["delivery_cpu"], 3),
        "client_cpu_ms_per_raw_post": round(got["raw_cpu"], 3),
        "floor_jobs_per_s": round(floor_jobs, 1),
        "floor_slot_jobs_per_s": round(slot_jobs, 1),
        "deliverer_cpu_ms_per_floor_job": round(floor_cpu, 3),
        "deliverer_cpu_ms_per_floor_slot_job": round(slot_cpu, 3),
        "commits_per_delivery": round(got["delivery_commits"], 2),
        "commits_per_floor_job": round(floor_commits, 2),
        "commits_per_floor_slot_job": round(slot_commits, 2),
        "ceiling_deliveries_per_s": round(ceiling, 1),
        "ceiling_unslotted_deliveries_per_s": round(ceiling_unslotted, 1),
        "ratios": {
            "deliveries_vs_raw_posts": round(deliveries / raw, 3),
            "floor_jobs_vs_raw_posts": round(floor_jobs / raw, 3),
            "floor_slot_jobs_vs_raw_posts": round(slot_jobs / raw, 3),
            "deliveries_vs_floor_slot_jobs": round(deliveries / slot_jobs, 3),
            "ceiling_vs_raw_posts": round(ceiling / raw, 3),
            "deliveries_vs_ceiling": round(deliveries / ceiling, 3),
            "ceiling_unslotted_vs_raw_posts": round(ceiling_unslotted / raw, 3),
        },
        "targets": {"deliveries_vs_raw_posts": 0.5, "delivery_p50_ms": 10},
        "analyze": ANALYZE,
        "commit": commit,
        "at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }


if __name__ == "__main__":
    if sys.argv[1:] == ["receive"]:
        receive()
    else:
        with bench_lock():  # one bench of ours at a time on this machine
            line = run()
        print(json.dumps(line), flush=True)
