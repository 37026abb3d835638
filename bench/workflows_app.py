"""The app ``bench/workflows.py`` runs (in its worker, and in the api it starts): a no-op
child, a parent fanning out ``count`` of them and gathering them, and a no-op whose result
the result waits read."""

from __future__ import annotations

import sys
import time
from typing import Any

from ujobs import Run, define_api, job, t


@job(
    name="bench.wf.noop",
    input=t.object(n=t.number.int()),
    idempotency_key=lambda i: f"wf:{i.n}",
    tenant="none",
    queue="bench",
)
async def noop(run: Run[Any]) -> Any:
    """Nothing: returns its number (the result a wait reads)."""
    return run.input.n


@job(
    name="bench.wf.stamped",
    input=t.object(n=t.number.int()),
    idempotency_key=lambda i: f"wf-stamped:{i.n}",
    tenant="none",
    queue="bench",
)
async def stamped(run: Run[Any]) -> Any:
    """Nothing but its number and when its body started (epoch ms, this host's clock): the
    result the result waits read, and the pickup they measure beside it."""
    return {"n": run.input.n, "startedMs": time.time() * 1000}


@job(
    name="bench.wf.fanout",
    input=t.object(count=t.number.int(), round=t.optional(t.number.int())),
    idempotency_key=lambda i: f"fanout:{i.count}:{i.round or 0}",
    tenant="none",
    queue="bench",
)
async def fanout(run: Run[Any]) -> Any:
    """``count`` no-op children in ONE step (``enqueue_many``), then one gather."""
    children = await run.step.enqueue_many(noop, [{"n": n} for n in range(run.input.count)])
    results = await run.step.gather(children)
    return len(results)


@job(
    name="bench.wf.fanout_each",
    input=t.object(count=t.number.int(), round=t.optional(t.number.int())),
    idempotency_key=lambda i: f"fanout-each:{i.count}:{i.round or 0}",
    tenant="none",
    queue="bench",
)
async def fanout_each(run: Run[Any]) -> Any:
    """``count`` no-op children, ONE STEP EACH (``run.step.enqueue``), then one gather."""
    children = [await run.step.enqueue(noop, {"n": -1 - n}) for n in range(run.input.count)]
    results = await run.step.gather(children)
    return len(results)


api = define_api(jobs=[sys.modules[__name__]])
