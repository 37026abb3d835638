"""The NATS edge against the HTTP edge and against JetStream itself: prints ONE JSON line.

    .venv/bin/python bench/nats_edge.py

One real ``ujobs api`` process (``--port 0``, ``http_edge_app``: one no-op job keyed by its
``seq``) with ``NATS_URL`` (``BENCH_NATS_URL``, default the local 4222) under a prefix of its
own (``BENCH_NATS_PREFIX``, default a random one), on the database ``BENCH_NATS_DB``
(``bench_nats``, created anew on ``BENCH_PG``, dropped at the end), an operator token, and
the load from this process. ``BENCH_NATS_N`` (20,000) jobs a phase, ``BENCH_NATS_CLIENTS`` (64)
concurrent callers; the HTTP figure is ``bench/http_edge.py``'s ``http_enqueue_per_s``,
measured here again against the same api in the same minutes:

* ``http_enqueue_per_s`` and ``nats_request_enqueue_per_s``: single enqueues over
  ``POST /v1/jobs/bench.noop`` and over request/reply on ``<prefix>.enqueue.bench.noop``, sent
  in ``CHUNKS`` alternating chunks (HTTP, NATS, HTTP, ...) so both see the same minutes;
* ``jetstream_publish_ceiling_per_s``: the same callers publishing with acks to a stream
  nothing consumes (what producers can send at all here): the better of two such phases in
  the run, ``jetstream_ceiling_phase_per_s`` (a stream of its own, before the JetStream
  phases) and ``jetstream_stored_publish_per_s`` (below), since one phase of a few seconds
  swings with the disk's writes by up to 2x;
* ``jetstream_enqueue_per_s``: issue 24's "published as fast as acks allow, then drained into
  rows": the api is paused (``SIGSTOP``) while the same callers publish ``N`` messages to
  ``<prefix>.js.enqueue.bench.noop`` (``jetstream_stored_publish_per_s``), then resumed
  (``SIGCONT``), and timed from the resume until it has committed every row: how fast the api
  turns messages producers have published into rows (``jetstream_drain_cpu_us_per_msg``: each
  process's CPU a message over that drain);
* ``jetstream_concurrent_per_s``: the same publishes with the api consuming as they arrive,
  timed from the first publish until the api has committed every row (the publisher, nats-server,
  the api and Postgres all on the same cores at once);
* ``jetstream_cpu_us_per_msg``: each process's CPU (user + system, from ``/proc``) over the
  ``jetstream_concurrent`` phase, a message: ``publisher`` (this process), ``nats_server`` (the
  process listening on ``BENCH_NATS_URL``'s port), ``api`` (also ``api_cpu_us_per_msg``) and
  ``postgres`` (the bench database's server processes and the WAL writer);
  ``ceiling_cpu_us_per_msg`` the same for the ceiling's phase (publisher, nats-server);
* ``jetstream_machine_bound_per_s`` and ``ceiling_machine_bound_per_s``: the most messages a
  second this machine's cores could carry at those costs (``bench/cpu_share.py``: every core
  busy on the pipeline, no single-threaded process past one core); ``bounds``'s
  ``jetstream_concurrent_vs_publish_ceiling`` is their ratio (null with no CPU seen: a phase
  shorter than the clock's tick): the highest ``jetstream_concurrent_vs_publish_ceiling``
  this machine allows, measured in the same run. Both phases run every process on the same
  cores (``os.cpu_count()``), so a consumer costing anything lowers it below 1;
  ``api_us_budget_for_target``: the api's CPU a message at which that bound would reach 0.7
  (the stored drain's target), every other process costing what it cost in this run;
* ``drain_per_s``: those rows claimed and acked by a Postgres driver with the settlements
  outbox on (claims of 100, acks in flight together), from the drain's start to the last ack;
* ``settled_backlog_per_s``: the relay's pace with settlements waiting: ``N`` settlement rows
  written at once (a second attempt of every job, as if NATS had been away during a drain),
  timed from their commit to the last one published;
* ``settled_published_per_s``: the drain's settlements end to end, from the drain's start to
  the last one published; ``settled_lag_ms`` that last publish after the last ack, and
  ``settled_waiting_at_last_ack`` how many were not published yet at the last ack.
  "Published" is when a subscriber of the settled subjects receives the message.

``ratios``: ``nats_request_vs_http`` (issue 24 asks >= 1.0), ``jetstream_vs_publish_ceiling``
(>= 0.7: the stored messages' drain against the ceiling),
``jetstream_concurrent_vs_publish_ceiling`` (no target: on 2 cores the publisher and the api
take turns on the same cores, so ``bounds`` prints what the machine allows beside it),
``settled_vs_drain`` (>= 1.0: issue 24's "settlements keep up with the drain",
published/s against the drain's jobs/s, both measured here: the relay's pace with settlements
waiting against the drain's pace; a relay faster than the settles never falls further behind
than one of its passes) and ``settled_end_to_end_vs_drain`` (no target: both timed from the
drain's start, it is below 1 for ANY relay, since the last settlement commits with the last
ack and only then can be claimed, published and acked by JetStream; ``settled_lag_ms`` says
by how much, ``settled_waiting_at_last_ack`` that it is one pass's worth, not a backlog);
``targets`` judges each target.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import nats
import orjson
from api_process import start_api  # beside this script
from bench_db import drop_database, fresh_database
from cpu_share import CpuGroups, listener_pid, pipeline_bound_per_s

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

NATS_URL = os.environ.get("BENCH_NATS_URL", "nats://127.0.0.1:4222")
DB_NAME = os.environ.get("BENCH_NATS_DB", "bench_nats")
CLIENTS = int(os.environ.get("BENCH_NATS_CLIENTS", "64"))
N = int(os.environ.get("BENCH_NATS_N", "20000"))
CHUNKS = 5
JOB = "bench.noop"
CORES = os.cpu_count() or 1
JETSTREAM_TARGET = 0.7
PREFIX = os.environ.get("BENCH_NATS_PREFIX") or f"bnats{uuid.uuid4().hex[:8]}"


async def clients(n: int, start: int, call: Any) -> float:
    """``n`` calls of ``call(seq)`` from ``CLIENTS`` concurrent callers; answers seconds."""
    counter = iter(range(start, start + n))

    async def caller() -> None:
        for seq in counter:
            await call(seq)

    t0 = time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(CLIENTS)))
    return time.perf_counter() - t0


async def consumed(js: Any, names: Any, pool: asyncpg.Pool[Any], rows: int) -> float:
    """The moment the api's consumer has acked every stored message (it acks a message only
    after its row commits), then checked once against ``x_jobs``: ``rows`` rows. The consumer's
    state is asked of nats-server every 5 ms; a ``count(*)`` of the growing table that often
    would spend a good part of a core of the two the pipeline runs on."""
    while True:
        info = await js.consumer_info(names.enqueue_stream, names.durable)
        if info.num_pending == 0 and info.num_ack_pending == 0:
            at = time.perf_counter()
            break
        await asyncio.sleep(0.005)
    count = int(await pool.fetchval("select count(*) from x_jobs"))
    assert count == rows, (count, rows)
    return at


async def postgres_pids(pool: asyncpg.Pool[Any]) -> list[int]:
    """The bench database's server processes (the api's connections and ours) and the
    server's WAL writer, whose CPU the JetStream phase's commits spend."""
    rows = await pool.fetch(
        "select pid from pg_stat_activity where datname = $1 or backend_type = 'walwriter'",
        DB_NAME,
    )
    return [int(row["pid"]) for row in rows]


def start_profile(pid: int) -> subprocess.Popen[bytes] | None:
    """``py-spy record`` of the api over the JetStream phase when ``BENCH_NATS_PROFILE`` names
    the output (collapsed stacks, ``--format raw``); py-spy must be installed."""
    out = os.environ.get("BENCH_NATS_PROFILE")
    if not out:
        return None
    command = ["py-spy", "record", "--pid", str(pid), "--rate", "500", "--format", "raw"]
    spy = subprocess.Popen([*command, "--nonblocking", "-o", out], stderr=subprocess.DEVNULL)
    time.sleep(1.0)  # attached before the first publish
    return spy


def stop_profile(spy: subprocess.Popen[bytes] | None) -> None:
    if spy is not None:
        spy.send_signal(signal.SIGINT)
        spy.wait(30)


class SettledWatch:
    """Settlements as a subscriber of the settled subjects sees them published: a count, and
    the moment it reached a number (the relay's own marking comes after, so not that)."""

    def __init__(self) -> None:
        self.count = 0
        self._changed = asyncio.Event()
        self._at: dict[int, float] = {}

    async def heard(self, msg: Any) -> None:
        self.count += 1
        self._at[self.count] = time.perf_counter()
        self._changed.set()

    async def reached(self, count: int) -> float:
        while self.count < count:
            self._changed.clear()
            await asyncio.wait_for(self._changed.wait(), 60)
        return self._at[count]


# The backlog: a second attempt's settlement of every job, written in one statement.
BACKLOG = """
insert into x_settlements (job_id, run_id, name, tenant_id, outcome, code, attempt, settled_at)
select id, run_id, name, tenant_id, 'completed', null, 2, now() from x_jobs
"""


async def main() -> dict[str, Any]:
    from ujobs.drivers.base import ClaimOptions
    from ujobs.drivers.postgres import postgres_driver
    from ujobs.services.api.tokens import TokenStore
    from ujobs.services.nats.names import NatsNames

    names = NatsNames(PREFIX)
    dsn = await fresh_database(DB_NAME)
    pool = await asyncpg.create_pool(dsn, min_size=2, max_size=8)
    assert pool is not None
    token = (await TokenStore(pool).create(tenant=None, scopes=["enqueue:*"])).secret
    auth = {"Authorization": f"Bearer {token}"}
    proc, url = start_api(dsn, NATS_URL=NATS_URL, UJOBS_NATS_PREFIX=PREFIX)
    nats_pid = listener_pid(int(NATS_URL.rsplit(":", 1)[1]))
    cpu = CpuGroups(
        {
            "publisher": [os.getpid()],
            "nats_server": [] if nats_pid is None else [nats_pid],
            "api": [proc.pid],
            "postgres": [],
        }
    )
    load = os.getloadavg()[0]
    nc = await nats.connect(NATS_URL)
    js = nc.jetstream()
    ceiling_stream = f"{PREFIX.upper()}_CEILING"
    try:
        await js.add_stream(name=ceiling_stream, subjects=[f"{PREFIX}.ceiling.>"])
        seq = 0
        http_s = nats_s = 0.0
        size = N // CHUNKS
        headers = {**auth, "Content-Type": "application/json"}
        connector = aiohttp.TCPConnector(limit=CLIENTS)
        async with aiohttp.ClientSession(connector=connector, headers=headers) as http:

            async def http_call(s: int) -> None:
                body = orjson.dumps({"input": {"seq": s}})
                async with http.post(f"{url}/v1/jobs/{JOB}", data=body) as r:
                    await r.read()
                    assert r.status == 202, r.status

            async def nats_call(s: int) -> None:
                body = orjson.dumps({"input": {"seq": s}})
                reply = await nc.request(names.enqueue_subject(JOB), body, 10, headers=auth)
                assert b'"error"' not in reply.data, reply.data

            await clients(200, 10_000_000, http_call)  # warm both paths
            await clients(200, 10_100_000, nats_call)
            for _ in range(CHUNKS):
                http_s += await clients(size, seq, http_call)
                seq += size
                nats_s += await clients(size, seq, nats_call)
                seq += size

        async def ceiling_call(s: int) -> None:
            body = orjson.dumps({"input": {"seq": s}})
            await js.publish(f"{PREFIX}.ceiling.x", body, headers=auth)

        cpu.pids["postgres"] = await postgres_pids(pool)
        before = cpu.snapshot()
        ceiling_s = await clients(N, 0, ceiling_call)
        ceiling_cpu = cpu.used(before, cpu.snapshot())
        await pool.execute("truncate x_jobs")

        async def js_call(s: int) -> None:
            body = orjson.dumps({"input": {"seq": s}})
            await js.publish(names.js_enqueue_subject(JOB), body, headers=auth)

        profiler = start_profile(proc.pid)
        before = cpu.snapshot()
        t0 = time.perf_counter()
        published_s = await clients(N, 20_000_000, js_call)
        t_rows = await consumed(js, names, pool, N)
        js_s = t_rows - t0
        js_cpu = cpu.used(before, cpu.snapshot())
        stop_profile(profiler)

        settled = SettledWatch()
        await nc.subscribe(names.settled_wildcard, cb=settled.heard)
        await nc.flush()
        driver = postgres_driver(pool, settlements=True)
        t0 = time.perf_counter()
        acked = 0
        while acked < N:
            jobs = await driver.claim(
                ClaimOptions(
                    queues=("default",), limit=100, worker_id="bench", visibility_ms=60_000
                )
            )
            await asyncio.gather(*(driver.ack(j.id, j.ref) for j in jobs))
            acked += len(jobs)
        t_drain = time.perf_counter()
        waiting_at_last_ack = N - settled.count
        t_pub = await settled.reached(N)
        await driver.close()
        t_backlog = time.perf_counter()
        await pool.execute(BACKLOG)
        backlog_s = await settled.reached(2 * N) - t_backlog

        # Published as fast as acks allow while the api is paused, then drained into rows.
        os.kill(proc.pid, signal.SIGSTOP)
        try:
            stored_publish_s = await clients(N, 30_000_000, js_call)
        finally:
            os.kill(proc.pid, signal.SIGCONT)
        before = cpu.snapshot()
        t_resumed = time.perf_counter()
        stored_drain_s = await consumed(js, names, pool, 2 * N) - t_resumed
        drain_cpu = cpu.used(before, cpu.snapshot())
    finally:
        await js.delete_stream(ceiling_stream)
        proc.terminate()
        proc.wait(60)
        for stream in (names.enqueue_stream, names.settled_stream):
            try:
                await js.delete_stream(stream)
            except Exception as exc:
                print(f"nats_edge: could not delete {stream}: {exc}", file=sys.stderr)
        await nc.drain()
        await pool.close()
        await drop_database(DB_NAME)
    done = size * CHUNKS
    figures = {
        "http_enqueue_per_s": done / http_s,
        "nats_request_enqueue_per_s": done / nats_s,
        "jetstream_publish_ceiling_per_s": N / min(ceiling_s, stored_publish_s),
        "jetstream_ceiling_phase_per_s": N / ceiling_s,
        "jetstream_enqueue_per_s": N / stored_drain_s,
        "jetstream_stored_publish_per_s": N / stored_publish_s,
        "jetstream_concurrent_per_s": N / js_s,
        "drain_per_s": N / (t_drain - t0),
        "settled_published_per_s": N / (t_pub - t0),
        "settled_lag_ms": (t_pub - t_drain) * 1000,
        "settled_waiting_at_last_ack": waiting_at_last_ack,
        "settled_backlog_per_s": N / backlog_s,
        "api_cpu_us_per_msg": js_cpu["api"] / N * 1e6,
        "jetstream_published_per_s": N / published_s,
    }
    js_us = {role: round(used / N * 1e6, 1) for role, used in js_cpu.items()}
    drain_us = {role: round(used / N * 1e6, 1) for role, used in drain_cpu.items()}
    ceiling_us = {
        role: round(ceiling_cpu[role] / N * 1e6, 1) for role in ("publisher", "nats_server")
    }
    bound = pipeline_bound_per_s(js_us, cores=CORES, single_threaded=("publisher", "api"))
    ceiling_bound = pipeline_bound_per_s(ceiling_us, cores=CORES, single_threaded=("publisher",))
    # The api's CPU a message at which the bound would reach the 0.7 target, the other
    # processes costing what they cost here.
    others = sum(us for role, us in js_us.items() if role != "api")
    api_budget = bound_ratio = None
    if bound is not None and ceiling_bound is not None:
        api_budget = round(CORES * 1e6 / (JETSTREAM_TARGET * ceiling_bound) - others, 1)
        bound_ratio = round(min(bound, ceiling_bound) / ceiling_bound, 3)
    ratios = {
        "nats_request_vs_http": figures["nats_request_enqueue_per_s"]
        / figures["http_enqueue_per_s"],
        "jetstream_vs_publish_ceiling": figures["jetstream_enqueue_per_s"]
        / figures["jetstream_publish_ceiling_per_s"],
        "jetstream_concurrent_vs_publish_ceiling": figures["jetstream_concurrent_per_s"]
        / figures["jetstream_publish_ceiling_per_s"],
        "settled_vs_drain": figures["settled_backlog_per_s"] / figures["drain_per_s"],
        "settled_end_to_end_vs_drain": figures["settled_published_per_s"] / figures["drain_per_s"],
    }
    wanted = {
        "nats_request_vs_http": 1.0,
        "jetstream_vs_publish_ceiling": JETSTREAM_TARGET,
        "settled_vs_drain": 1.0,
    }
    return {
        "bench": "nats_edge",
        "n": N,
        "clients": CLIENTS,
        "load": round(load, 2),
        **{k: round(v, 1) for k, v in figures.items()},
        "jetstream_cpu_us_per_msg": js_us,
        "jetstream_drain_cpu_us_per_msg": drain_us,
        "ceiling_cpu_us_per_msg": ceiling_us,
        "jetstream_machine_bound_per_s": None if bound is None else round(bound, 1),
        "ceiling_machine_bound_per_s": None if ceiling_bound is None else round(ceiling_bound, 1),
        "api_us_budget_for_target": api_budget,
        "ratios": {k: round(v, 3) for k, v in ratios.items()},
        "targets": {
            k: {"want": f">= {w}", "ratio": round(ratios[k], 3), "met": ratios[k] >= w}
            for k, w in wanted.items()
        },
        "bounds": {"jetstream_concurrent_vs_publish_ceiling": bound_ratio},
    }


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main())))
