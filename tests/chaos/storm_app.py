"""The storm's job app (``UJOBS_APP=tests.chaos.storm_app:api``): every body records its effects
in a LEDGER table of the storm's own Postgres (``STORM_LEDGER_URL``), inside steps.

* ``storm.work`` — steps ``a`` and ``b``, each inserting one ledger row (job, step, attempt,
  pid, time) as its effect, a short sleep between them; then, outside any step, an ``end``
  row: the body ran to its end. A step's row recorded twice is a step re-run (allowed only for
  a step interrupted before its result was stored); two ``end`` rows are a job completed
  twice. ``src`` names the participant that enqueued it, ``at_ms`` when (the pickup latency).
* ``storm.tick`` — what the per-second task ``storm.every-second`` enqueues (``run-all``
  catch-up): one ledger row per occurrence, in a step.
* ``storm.hostile`` — what the hostile participant (``participants/hostile.py``) aims its deep
  bodies at: its ``data`` takes any JSON, so a nesting the parser takes reaches the validator
  and the serializer; a row of it (a revoked token let through) runs and does nothing.
* ``storm.export`` — ``export_rows()`` of the fixed table ``storm_export_rows`` (the exports
  participant fills it) to ``storm/<export_id>/``, a page of ``EXPORT_BATCH`` rows a part, paced
  so an export lasts long enough for the storm's SIGKILLs to land inside it.

The ledger's connection is a small pool opened on first use; a ledger write that fails (the
storm restarts Postgres) fails the attempt, which is retried.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import asyncpg

from ujobs import Retry, Run, define_api, job, t, task
from ujobs.exports import export_rows, keyset

LEDGER_DDL = """
create table if not exists storm_ledger (
  job_id  text        not null,
  step    text        not null,
  attempt integer     not null,
  pid     integer     not null,
  at      timestamptz not null default clock_timestamp(),
  at_ms   bigint      not null
);
create table if not exists storm_orders (
  id     text primary key,
  job_id text not null
);
"""
"""``storm_orders``: the business rows the outbox participant commits with its staged jobs."""

RETRY = Retry(attempts=25, backoff="fixed", delay="200ms", jitter=False)
WORK_GAP_MS = int(os.environ.get("STORM_WORK_GAP_MS", "20"))

_pool: asyncpg.Pool[Any] | None = None
_pool_lock = asyncio.Lock()


async def _ledger() -> asyncpg.Pool[Any]:
    global _pool
    async with _pool_lock:
        if _pool is None:
            _pool = await asyncpg.create_pool(
                os.environ["STORM_LEDGER_URL"], min_size=1, max_size=4
            )
        return _pool


async def record(run: Run[Any], step: str) -> None:
    """One ledger row: ``step`` of ``run``'s job had its effect in this process, now."""
    pool = await _ledger()
    await pool.execute(
        "insert into storm_ledger (job_id, step, attempt, pid, at_ms) values ($1, $2, $3, $4, $5)",
        run.job_id,
        step,
        run.attempt,
        os.getpid(),
        int(time.time() * 1000),
    )


async def _step(run: Run[Any], name: str) -> None:
    async def effect(_signal: Any) -> str:
        await record(run, name)
        return name

    await run.step.run(name, effect)


@job(
    name="storm.work",
    input=t.object(src=t.string, n=t.number.int(), at_ms=t.number.int()),
    idempotency_key=lambda i: f"{i.src}:{i.n}",
    tenant="none",
    retry=RETRY,
)
async def work(run: Run[Any]) -> None:
    await _step(run, "a")
    await asyncio.sleep(WORK_GAP_MS / 1000)
    await _step(run, "b")
    await record(run, "end")


@job(
    name="storm.tick",
    input=t.object(occurrence_ms=t.number.int()),
    idempotency_key=lambda i: f"tick:{i.occurrence_ms}",
    tenant="none",
    retry=RETRY,
)
async def tick(run: Run[Any]) -> None:
    await _step(run, "tick")


@job(
    name="storm.hostile",
    input=t.object(data=t.any),
    idempotency_key=lambda i: "hostile",
    tenant="none",
    retry=RETRY,
)
async def hostile(run: Run[Any]) -> None:
    return None


every_second = task(
    name="storm.every-second",
    cron="* * * * * *",
    tz="UTC",
    catch_up="run-all",
    max_catch_up=120,
    enqueue=lambda occurrence_ms: [(tick, {"occurrence_ms": occurrence_ms})],
)

EXPORT_COLUMNS = ("id", "label", "amount")
EXPORT_BATCH = 250
EXPORT_RATE = 1_000
"""Rows a second: an export of the participant's 2,000 rows takes about two seconds."""


class _LedgerConnections:
    """The ledger's pool as ``keyset()`` takes it (``acquire()``), opened on first use."""

    @contextlib.asynccontextmanager
    async def acquire(self) -> AsyncIterator[Any]:
        pool = await _ledger()
        async with pool.acquire() as conn:
            yield conn


export = export_rows(
    name="storm.export",
    input=t.object(export_id=t.string),
    tenant="none",
    prefix=lambda i: f"storm/{i.export_id}",
    source=lambda run: keyset(
        "storm_export_rows",
        key="id",
        columns=EXPORT_COLUMNS,
        pool=_LedgerConnections(),
        tenant_free=True,  # the storm's own rows: no tenant's
    ),
    columns=EXPORT_COLUMNS,
    batch=EXPORT_BATCH,
    rate=EXPORT_RATE,
    retry=RETRY,
)

api = define_api(jobs=[sys.modules[__name__]], tasks=[sys.modules[__name__]], install=False)
