"""A quick local measurement of the worker's per-job path: drain N no-op jobs with ONE worker
(16 slots, one queue) on Postgres, in this process, and print one JSON line.

    python bench/worker_drain_micro.py            # BENCH_N=20000 by default
    BENCH_N=5000 BENCH_SLOTS=16 python bench/worker_drain_micro.py
    BENCH_CLAIM_AHEAD=0 python bench/worker_drain_micro.py    # claim_ahead off (default: at
                                                              # most sixteen per slot, as
                                                              # ``ujobs worker``)
    BENCH_HISTORY=1000000 python bench/worker_drain_micro.py  # over a million finished rows
    BENCH_FLOOR=0 python bench/worker_drain_micro.py          # without the floor beside it
    BENCH_GC_THRESHOLD=0 python bench/worker_drain_micro.py   # Python's own collector thresholds
    BENCH_CALLGRIND=1 BENCH_N=2000 BENCH_FLOOR=0 valgrind --tool=callgrind --instr-atstart=no \
        python bench/worker_drain_micro.py   # instructions of the drain alone ("Collected";
                                             # the floor's own run: bench/worker_floor.py)

The worker runs with the collector threshold ``ujobs worker`` sets (``UJOBS_GC_THRESHOLD``), on
the event loop it runs on (``UJOBS_EVENT_LOOP``: uvloop unless set to ``asyncio``), on
the pool ``ujobs worker`` builds (``postgres_pool``: generic plans, no
reset statement). The jobs are enqueued before the worker starts (``enqueue_many``, 1,000 a
statement), so the figure is the drain alone: from ``start()`` to the last settle. It runs in
a throwaway database (created from ``TEST_DATABASE_URL``'s server, migrated, dropped). Not the
peer comparison — that is ``bench/throughput.py`` through the shared harness — but the number
to watch while changing the worker's hot path.

``statements`` times the driver's two hot statements as the worker sends them (calls and mean
ms of ``claim`` and of each batched ``ack``), by wrapping the driver's private ``_fetch``: a
bench's probe, not an API. With ``BENCH_HISTORY=<n>`` the table first gets ``n`` finished runs
(``bench_history.insert_history``, as the throughput bench's history pass), so the two
statements can be compared with and without history.

``postgres_cpu_ms_per_job`` is the CPU the drain's database backends spent (from ``/proc``,
every server process serving the throwaway database) over the jobs: beside
``worker_cpu_ms_per_job`` it says which side of the wire bounds the drain on a machine whose
two cores both of them share.

``floor_cpu_ms_per_job`` is ``bench/worker_floor.py`` run right after the drain, same ``n`` and
slots: the least a Python asyncio worker on asyncpg pays per no-op job on this machine (a task
per job, coalesced acks, nothing a job queue promises). Issue 39's target (0.05 ms) is read
against it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncpg
import orjson
from prometheus_client import CollectorRegistry

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_history import insert_history  # beside this script: on sys.path when it runs
from cpu_share import database_cpu_s
from worker_floor import floor_drain, instrument

from ujobs import job, t
from ujobs.drivers.postgres.driver import postgres_driver
from ujobs.drivers.postgres.migrate import migrate
from ujobs.drivers.postgres.pool import postgres_pool
from ujobs.drivers.postgres.sql import query
from ujobs.execution.run import Run
from ujobs.jobs.registry import Registry
from ujobs.lifecycle import Lifecycle
from ujobs.metrics import JobMetrics
from ujobs.services.config.variables import CLAIM_AHEAD_PER_SLOT
from ujobs.services.runtime.event_loop import loop_from_env, run_on
from ujobs.services.runtime.gc_tuning import DEFAULT_GC_THRESHOLD, tune_gc
from ujobs.worker import job_worker

ADMIN = os.environ.get("TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres")


@job(input=t.object(n=t.number.int()), idempotency_key=lambda i: f"noop:{i.n}", tenant="none")
async def noop(run: Run[Any]) -> None:
    """Does nothing: the figure is the queue's cost per job."""


class StatementTimes:
    """Calls and seconds per hot statement, filled by the wrapper ``time_statements`` puts
    around the driver's ``_fetch``."""

    def __init__(self) -> None:
        self.spent: dict[str, list[float]] = {"claim": [], "ack": []}

    def summary(self) -> dict[str, dict[str, float]]:
        return {
            name: {"calls": len(times), "mean_ms": round(sum(times) * 1000 / len(times), 3)}
            for name, times in self.spent.items()
            if times
        }


def time_statements(driver: Any) -> StatementTimes:
    times = StatementTimes()
    names = {query("claim"): "claim", query("ack"): "ack"}
    fetch: Callable[..., Awaitable[list[Any]]] = driver._fetch

    async def timed(sql: str, *args: Any) -> list[Any]:
        started = time.perf_counter()
        try:
            return await fetch(sql, *args)
        finally:
            name = names.get(sql)
            if name is not None:
                times.spent[name].append(time.perf_counter() - started)

    driver._fetch = timed
    return times


async def main() -> None:
    n = int(os.environ.get("BENCH_N", "20000"))
    slots = int(os.environ.get("BENCH_SLOTS", "16"))
    ahead = int(os.environ.get("BENCH_CLAIM_AHEAD", str(CLAIM_AHEAD_PER_SLOT * slots)))
    history = int(os.environ.get("BENCH_HISTORY", "0"))
    name = f"ujobs_bench_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    head = ADMIN.rpartition("/")[0]
    admin = await asyncpg.connect(ADMIN)
    await admin.execute(f'CREATE DATABASE "{name}"')
    try:
        setup = await asyncpg.connect(f"{head}/{name}")
        try:
            await migrate(setup)
            if history:
                await insert_history(setup, history, name=noop.name, queue="default")
        finally:
            await setup.close()
        pool = await postgres_pool(f"{head}/{name}", min_size=4, max_size=8)
        driver = postgres_driver(pool)
        statements = time_statements(driver)
        reg = Registry()
        reg.register_job(noop)
        for start in range(0, n, 1_000):
            await driver.enqueue_many(
                [noop.request({"n": i}) for i in range(start, min(n, start + 1_000))]
            )
        worker = job_worker(
            driver=driver,
            context=None,
            registry=reg,
            concurrency=slots,
            claim_ahead=ahead,
            metrics=JobMetrics(CollectorRegistry()),
            lifecycle=Lifecycle(),
            close_driver=False,
        )
        drained = asyncio.Event()

        def on_signal(event: str, _: Any) -> None:
            if event == "settled" and worker.runner.counters.settled >= n:
                drained.set()

        # Woken by the last settle rather than polled: a poll's turns grow with the wall time
        # (under valgrind, with the machine's load), and callgrind would count them.
        worker.signals.subscribe(on_signal)
        tune_gc(int(os.environ.get("BENCH_GC_THRESHOLD", str(DEFAULT_GC_THRESHOLD))))
        instrument("on")
        began = time.perf_counter()
        cpu_began = time.process_time()
        server_began = database_cpu_s(name)
        await worker.start()
        await drained.wait()
        seconds = time.perf_counter() - began
        cpu = time.process_time() - cpu_began
        server_cpu = database_cpu_s(name) - server_began
        instrument("off")
        await worker.stop()
        left = await pool.fetchval(  # the drained jobs only: 2 % of the history is not done
            "select count(*) from x_jobs where state <> 'done' and idempotency_key like 'noop:%'"
        )
        await pool.close()
        floor = (
            await floor_drain(ADMIN, n, slots)
            if os.environ.get("BENCH_FLOOR", "1") != "0"
            else None
        )
        print(
            orjson.dumps(
                {
                    "bench": "worker_drain_micro",
                    "driver": "postgres",
                    "jobs": n,
                    "history_rows": history,
                    "slots": slots,
                    "claim_ahead": ahead,
                    "seconds": round(seconds, 3),
                    "jobs_per_s": round(n / seconds, 1),
                    "worker_cpu_ms_per_job": round(cpu * 1000 / n, 3),
                    "postgres_cpu_ms_per_job": round(server_cpu * 1000 / n, 3),
                    "passes": worker.stats().passes,
                    "not_done": left,
                    "statements": statements.summary(),
                    **(
                        {
                            "floor_cpu_ms_per_job": floor["cpu_ms_per_job"],
                            "floor_jobs_per_s": floor["jobs_per_s"],
                            "cpu_vs_floor": round(cpu * 1000 / n / floor["cpu_ms_per_job"], 2),
                        }
                        if floor is not None
                        else {}
                    ),
                }
            ).decode()
        )
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    run_on(loop_from_env(os.environ), main())
