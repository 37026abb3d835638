"""The jobs the worker process tests run (``tests/e2e/worker_main.py`` serves them).

Each body prints one JSON line when it starts (``{"event": "started", ...}``) so the test knows
the process is mid-job before it sends a signal.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from typing import Any

import orjson

from ujobs import job, t
from ujobs.execution.run import Run
from ujobs.jobs.registry import Registry

QUEUE = "e2e"


def _started(run: Run[Any]) -> None:
    line = {"event": "started", "job": run.name, "job_id": run.job_id, "attempt": run.attempt}
    sys.stdout.write(orjson.dumps(line).decode() + "\n")
    sys.stdout.flush()


@job(
    input=t.object(n=t.number.int()),
    idempotency_key=lambda i: f"sticky:{i.n}",
    tenant="none",
    queue=QUEUE,
    retry={"attempts": 3},
)
async def sticky(run: Run[Any]) -> str:
    """Hangs on its first attempt (the worker is killed under it), completes on the next."""
    _started(run)
    if run.attempt == 1:
        await asyncio.sleep(3_600)
    return "done"


@job(
    input=t.object(n=t.number.int()),
    idempotency_key=lambda i: f"doomed:{i.n}",
    tenant="none",
    queue=QUEUE,
    retry={"attempts": 1},
)
async def doomed(run: Run[Any]) -> None:
    """Its one attempt hangs, and its worker is killed: the next claim buries it."""
    _started(run)
    await asyncio.sleep(3_600)


@job(
    input=t.object(n=t.number.int()),
    idempotency_key=lambda i: f"cooperative:{i.n}",
    tenant="none",
    queue=QUEUE,
    retry={"attempts": 1},
)
async def cooperative(run: Run[Any]) -> None:
    """Reads its signal: unwinds at once when the worker drains."""
    _started(run)
    await run.signal.wait()
    run.signal.throw_if_aborted()


@job(
    input=t.object(n=t.number.int()),
    idempotency_key=lambda i: f"stubborn:{i.n}",
    tenant="none",
    queue=QUEUE,
    retry={"attempts": 3},
)
async def stubborn(run: Run[Any]) -> None:
    """Ignores its signal: the drain abandons it at the deadline."""
    _started(run)
    await asyncio.sleep(3_600)


@job(
    input=t.object(n=t.number.int()),
    idempotency_key=lambda i: f"quick:{i.n}",
    tenant="none",
    queue=QUEUE,
    retry={"attempts": 3},
)
async def quick(run: Run[Any]) -> str:
    """Starts, says so, and completes at once."""
    _started(run)
    return "done"


def _say(event: str, run: Run[Any], **fields: object) -> None:
    line = {"event": event, "job_id": run.job_id, "attempt": run.attempt, **fields}
    sys.stdout.write(orjson.dumps(line).decode() + "\n")
    sys.stdout.flush()


@job(
    input=t.object(n=t.number.int()),
    idempotency_key=lambda i: f"two_steps:{i.n}",
    tenant="none",
    queue=QUEUE,
    retry={"attempts": 3},
)
async def two_steps(run: Run[Any]) -> str:
    """Step ``a``, a second's pause (the test freezes the process in it), step ``b``; each
    step's function prints ``{"event": "effect", "step": ...}`` — its side effect — and the
    pause starts with ``paused``. A body the attempt's abort halts prints ``halted``."""

    async def effect(name: str) -> str:
        _say("effect", run, step=name)
        return name

    try:
        await run.step.run("a", lambda _: effect("a"))
        _say("paused", run)  # `a` is saved
        await asyncio.sleep(1.0)
        return await run.step.run("b", lambda _: effect("b"))
    except BaseException as exc:
        _say("halted", run, error=type(exc).__name__)
        raise


@job(
    input=t.object(n=t.number.int()),
    idempotency_key=lambda i: f"pill:{i.n}",
    tenant="none",
    queue=QUEUE,
    retry={"attempts": 2},
)
async def pill(run: Run[Any]) -> None:
    """A poison pill: kills its own worker (SIGKILL) as soon as it starts."""
    _started(run)
    os.kill(os.getpid(), signal.SIGKILL)


@job(
    input=t.object(n=t.number.int()),
    idempotency_key=lambda i: f"sticky-child:{i.n}",
    tenant="none",
    queue=QUEUE,
    retry={"attempts": 3},
)
async def sticky_child(run: Run[Any]) -> int:
    """A child that hangs on its first attempt (its worker is killed under it)."""
    _started(run)
    if run.attempt == 1:
        await asyncio.sleep(3_600)
    return int(run.input.n) * 2


@job(
    input=t.object(n=t.number.int()),
    idempotency_key=lambda i: f"gatherer:{i.n}",
    tenant="none",
    queue=QUEUE,
    event_poll="1h",
)
async def gatherer(run: Run[Any]) -> int:
    """Fans out three sticky children and gathers them (parked meanwhile: no process held)."""
    _started(run)
    kids = await run.step.enqueue_many(sticky_child, [{"n": n} for n in (1, 2, 3)])
    return sum(await run.step.gather(kids))


def app_registry() -> Registry:
    reg = Registry()
    for handle in (
        sticky,
        doomed,
        cooperative,
        stubborn,
        quick,
        two_steps,
        pill,
        sticky_child,
        gatherer,
    ):
        reg.register_job(handle)
    return reg
