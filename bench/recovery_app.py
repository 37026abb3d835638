"""The app ``bench/recovery.py`` runs under real ``ujobs worker`` processes
(``UJOBS_APP=recovery_app:api``, this folder on ``PYTHONPATH``).

* ``recovery.sleep`` — sleeps ``ms``: the load of the Postgres restart.
* ``recovery.steps`` — step ``a``, a ``gap`` mark and a sleep of ``gap_ms`` (where the bench
  freezes the worker), then steps ``b`` and ``c``; each step writes a mark
  (job, step, pid, attempt, wall time) to ``RECOVERY_MARKS_DIR/<pid>.jsonl`` when it STARTS:
  the side effect a worker past its lease must not perform.
* ``recovery.held`` — writes a ``start`` mark, then sleeps ``RECOVERY_HELD_MS`` (this worker
  process's setting): a slow worker holds its rows, a fast one drains them.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from ujobs import Retry, Run, define_api, job, t


def mark(run: Run[Any], step: str) -> None:
    """This process started ``step`` of ``run``'s job: one line in ``RECOVERY_MARKS_DIR``,
    written at once (no ``await``: nothing else of the worker runs before it lands)."""
    line = {
        "job_id": run.job_id,
        "step": step,
        "pid": os.getpid(),
        "attempt": run.attempt,
        "at": time.time(),
    }
    path = Path(os.environ["RECOVERY_MARKS_DIR"]) / f"{os.getpid()}.jsonl"
    with path.open("a", encoding="utf-8") as marks:
        marks.write(json.dumps(line) + "\n")


@job(
    name="recovery.sleep",
    input=t.object(n=t.number.int(), ms=t.number.int()),
    idempotency_key=lambda i: f"sleep:{i.n}",
    tenant="none",
    retry=Retry(attempts=5, backoff="fixed", delay="100ms", jitter=False),
)
async def sleep_job(run: Run[Any]) -> None:
    await asyncio.sleep(run.input.ms / 1000)


@job(
    name="recovery.steps",
    input=t.object(n=t.number.int(), gap_ms=t.number.int()),
    idempotency_key=lambda i: f"steps:{i.n}",
    tenant="none",
    retry=Retry(attempts=5, backoff="fixed", delay="100ms", jitter=False),
)
async def steps_job(run: Run[Any]) -> None:
    async def step(name: str) -> None:
        def body(_signal: Any) -> str:
            mark(run, name)
            return name

        await run.step.run(name, body)

    await step("a")
    # The gap, where the bench freezes the worker: a short timer, due before the worker's
    # heartbeat comes round, so on resume the body is the first thing to run.
    mark(run, "gap")
    await asyncio.sleep(run.input.gap_ms / 1000)
    await step("b")
    await step("c")


@job(
    name="recovery.held",
    input=t.object(n=t.number.int()),
    idempotency_key=lambda i: f"held:{i.n}",
    tenant="none",
    retry=Retry(attempts=5, backoff="fixed", delay="100ms", jitter=False),
)
async def held_job(run: Run[Any]) -> None:
    mark(run, "start")
    await asyncio.sleep(int(os.environ.get("RECOVERY_HELD_MS", "10")) / 1000)


api = define_api(jobs=[sys.modules[__name__]], install=False)
