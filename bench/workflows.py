"""Issue 37's children and result waits on Postgres, side by side in one run: prints ONE JSON
line.

    /work/venv/bin/python bench/workflows.py

**Fan-out vs batch** (``ratios.fanout_vs_batch``, the issue's bar: at least 0.8). The same
``BENCH_WF_N`` (default 1,000) no-op jobs, in one in-process worker of ``BENCH_WF_SLOTS``
(default 16) slots, claiming ahead as ``ujobs worker`` does (``CLAIM_AHEAD_PER_SLOT`` rows a
slot): once enqueued as one batch (``enqueue_many``) and drained, from the
enqueue to the last settle; once as the children of one parent (``bench.wf.fanout``: ONE
``run.step.enqueue_many`` step, then one ``run.step.gather``), from the parent's enqueue to its
own settle (its result read through ``job_result``, woken by the settle), each after an
unmeasured round of ``WARM_UP`` jobs of the same path (its statements prepared). Each rate is
jobs per second. ``BENCH_WF_ROUNDS`` rounds (default 6, so each order runs as often), the two
paths' order alternating, since one fan-out of 1,000 lasts about a fifth of a second and a
shared machine's drift is larger than that (the path run second in a round reads slower,
whichever it is): the ratio is the median of the rounds' own ratios (each round's in
``fanout_vs_batch_rounds``). ``fanout_step_each_*`` is the same
fan-out written as one ``run.step.enqueue`` step per child (``bench.wf.fanout_each``), once: a
figure to read (two round trips per child, in the parent's one task), not the bar. Every
enqueue goes through ``announcing()`` (this process's worker is told at once), as an app's
does.

**Result waits** (``result_wait_p50_ms`` against ``pickup_p50_ms``, the issue's bar: the wait
answers within the pickup p50 + 2 ms of the settle; ``ratios.result_wait_vs_pickup_p50_plus_2ms``
is at most 1 when it does). ``BENCH_WF_WAITS`` (default 1,000) jobs (``bench.wf.stamped``),
each enqueued due now through ``announcing()`` and at once waited for with
``GET /v1/jobs/{id}/result?wait=10s`` on a ``ujobs api`` process (``BENCH_WF_CLIENTS``
waits in flight, default 8), as a caller in another language does; the in-process worker runs
them. ``result_wait_ms`` is from the settle (the worker's ``settled`` signal: the ack landed)
to the answer's arrival; ``pickup_ms`` from the enqueue's return (its commit) to the body's
start (the job's result carries it). Both on this host's wall clock, in the same minutes.

It uses the database ``BENCH_WF_DB`` (default ``bench_workflows``), dropped and created anew.
The machine is shared: read the figures as of their run (bench/RESULTS.md says which).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
from prometheus_client import CollectorRegistry

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from api_process import start_api
from bench_db import drop_database, fresh_database
from workflows_app import fanout, fanout_each, noop, stamped

from ujobs.drivers.base import JobDriver
from ujobs.drivers.postgres.driver import postgres_driver
from ujobs.drivers.postgres.pool import postgres_pool
from ujobs.jobs.registry import Registry
from ujobs.jobs.result_read import job_result
from ujobs.lifecycle import Lifecycle
from ujobs.metrics import JobMetrics
from ujobs.services.config.variables import CLAIM_AHEAD_PER_SLOT
from ujobs.wake.announce import announcing
from ujobs.worker import job_worker
from ujobs.worker.job_worker import JobWorker

DB_NAME = os.environ.get("BENCH_WF_DB", "bench_workflows")
N = int(os.environ.get("BENCH_WF_N", "1000"))
SLOTS = int(os.environ.get("BENCH_WF_SLOTS", "16"))
WAITS = int(os.environ.get("BENCH_WF_WAITS", "1000"))
CLIENTS = int(os.environ.get("BENCH_WF_CLIENTS", "8"))
ROUNDS = int(os.environ.get("BENCH_WF_ROUNDS", "6"))
WARM_UP = 20
"""Jobs in each path's unmeasured first round (``fanout_vs_batch``)."""


def registry() -> Registry:
    reg = Registry()
    reg.register_job(noop)
    reg.register_job(fanout)
    reg.register_job(fanout_each)
    reg.register_job(stamped)
    return reg


def worker_of(driver: JobDriver) -> JobWorker:
    return job_worker(
        driver=driver,
        context=None,
        registry=registry(),
        queues=["bench"],
        concurrency=SLOTS,
        metrics=JobMetrics(CollectorRegistry()),
        lifecycle=Lifecycle(),
        close_driver=False,
        claim_ahead=CLAIM_AHEAD_PER_SLOT * SLOTS,
    )


async def settled(worker: JobWorker, count: int) -> None:
    while worker.runner.counters.settled < count:
        await asyncio.sleep(0.001)


async def batch_rate(driver: JobDriver, worker: JobWorker, n: int, offset: int) -> float:
    """``n`` no-op jobs as one batch, drained: jobs per second, enqueue to last settle."""
    before = worker.runner.counters.settled
    began = time.perf_counter()
    await driver.enqueue_many([noop.request({"n": offset + i}) for i in range(n)])
    await settled(worker, before + n)
    return n / (time.perf_counter() - began)


async def fanout_rate(
    driver: JobDriver, n: int, parent_job: Any = fanout, round_no: int = 0
) -> float:
    """One parent fanning out ``n`` children and gathering them: jobs per second, the
    parent's enqueue to its settle."""
    began = time.perf_counter()
    parent = await driver.enqueue(parent_job.request({"count": n, "round": round_no}))
    gathered = await job_result(parent.id, timeout="10m", driver=driver)
    elapsed = time.perf_counter() - began
    if gathered != n:
        raise SystemExit(f"the parent gathered {gathered} children, not {n}")
    return n / elapsed


async def fanout_vs_batch(driver: JobDriver, n: int, rounds: int = ROUNDS) -> dict[str, Any]:
    """``rounds`` rounds, the two paths' order alternating from round to round (a drift of the
    machine's load then weighs on both alike); each figure is the median over the rounds, and
    the ratio the median of each round's own ratio."""
    worker = worker_of(driver)
    await worker.start()
    batches: list[float] = []
    fans: list[float] = []
    eaches: list[float] = []
    try:
        # A warm-up of each path (WARM_UP jobs): every statement prepared on the held
        # connections before the clock runs, as in a process that has served a while.
        await batch_rate(driver, worker, WARM_UP, 3_000_000)
        await fanout_rate(driver, WARM_UP, round_no=-1)
        await fanout_rate(driver, WARM_UP, fanout_each, round_no=-1)
        for r in range(rounds):
            if r % 2 == 0:
                batches.append(await batch_rate(driver, worker, n, 1_000_000 + r * n))
                fans.append(await fanout_rate(driver, n, round_no=r))
            else:
                fans.append(await fanout_rate(driver, n, round_no=r))
                batches.append(await batch_rate(driver, worker, n, 1_000_000 + r * n))
        eaches.append(await fanout_rate(driver, n, fanout_each))
    finally:
        await worker.stop()
    batch = statistics.median(batches)
    ratios = [f / b for f, b in zip(fans, batches, strict=True)]
    return {
        "jobs": n,
        "rounds": rounds,
        "batch_jobs_per_s": round(batch, 1),
        "fanout_jobs_per_s": round(statistics.median(fans), 1),
        "fanout_step_each_jobs_per_s": round(eaches[0], 1),
        "fanout_vs_batch": round(statistics.median(ratios), 3),
        "fanout_vs_batch_rounds": [round(r, 3) for r in ratios],
        "fanout_step_each_vs_batch": round(eaches[0] / batch, 3),
    }


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


async def result_waits(
    pool: asyncpg.Pool[Any], driver: JobDriver, url: str, token: str, waits: int
) -> dict[str, Any]:
    """``waits`` jobs, each enqueued and at once waited for over HTTP (module docstring)."""
    announced = announcing(driver)
    worker = worker_of(announced)
    settled_ms: dict[str, float] = {}

    def on_signal(event: str, payload: Any) -> None:
        if event == "settled" and payload.settled:
            settled_ms[payload.job_id] = time.time() * 1000

    unsubscribe = worker.signals.subscribe(on_signal)
    await worker.start()
    answered: dict[str, float] = {}
    pickup_ms: list[float] = []
    seqs = iter(range(2_000_000, 2_000_000 + waits))
    try:
        async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"}) as http:

            async def client() -> None:
                for seq in seqs:
                    queued = await announced.enqueue(stamped.request({"n": seq}))
                    enqueued_ms = time.time() * 1000
                    async with http.get(f"{url}/v1/jobs/{queued.id}/result?wait=10s") as answer:
                        body = await answer.json()
                    answered[queued.id] = time.time() * 1000
                    result = body.get("result") or {}
                    if answer.status != 200 or result.get("n") != seq:
                        raise SystemExit(f"result wait answered {answer.status}: {body}")
                    pickup_ms.append(result["startedMs"] - enqueued_ms)

            await asyncio.gather(*(client() for _ in range(CLIENTS)))
    finally:
        unsubscribe()
        await worker.stop()
    wait_ms = [answered[job_id] - settled_ms[job_id] for job_id in answered]
    return {
        "waits": len(wait_ms),
        "result_wait_p50_ms": round(statistics.median(wait_ms), 2),
        "result_wait_p95_ms": round(percentile(wait_ms, 0.95), 2),
        "pickup_p50_ms": round(statistics.median(pickup_ms), 2),
        "pickup_p95_ms": round(percentile(pickup_ms, 0.95), 2),
    }


async def mint(pool: asyncpg.Pool[Any]) -> str:
    from ujobs.services.api.tokens import TokenStore

    issued = await TokenStore(pool).create(tenant=None, scopes=["read"], name="bench")
    return issued.secret


async def measure() -> dict[str, Any]:
    if not DB_NAME.startswith("bench_"):
        raise SystemExit(f"BENCH_WF_DB must start with bench_: {DB_NAME!r}")
    dsn = await fresh_database(DB_NAME)
    pool = await postgres_pool(dsn, min_size=4, max_size=12)
    driver = postgres_driver(pool)
    proc, url = start_api(dsn, UJOBS_APP="workflows_app:api")
    try:
        fan = await fanout_vs_batch(announcing(driver), N)
        waits = await result_waits(pool, driver, url, await mint(pool), WAITS)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        await driver.close()
        await pool.close()
        await drop_database(DB_NAME)
    return {
        "bench": "workflows",
        **{k: v for k, v in fan.items() if not k.endswith("_vs_batch")},
        **waits,
        "ratios": {
            "fanout_vs_batch": fan["fanout_vs_batch"],
            "result_wait_vs_pickup_p50_plus_2ms": round(
                waits["result_wait_p50_ms"] / (waits["pickup_p50_ms"] + 2), 3
            ),
            "fanout_step_each_vs_batch": fan["fanout_step_each_vs_batch"],
        },
    }


def main() -> None:
    logging.basicConfig(level=logging.WARNING)
    print(json.dumps(asyncio.run(measure())), flush=True)


if __name__ == "__main__":
    main()
