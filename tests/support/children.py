"""Jobs and a tiny executor loop for the children tests: a parent that fans out and gathers,
run one attempt at a time through the real executor on any driver."""

from __future__ import annotations

from typing import Any

from ujobs.drivers.base import ClaimedJob, ClaimOptions, JobDriver, JobRow
from ujobs.drivers.children import JobChildren
from ujobs.errors import UltimateError, register_error_retry
from ujobs.execution.attempt import execute_job
from ujobs.execution.outcome import JobExecution
from ujobs.execution.run import Run
from ujobs.jobs.job import JobHandle, job
from ujobs.jobs.retry import Retry
from ujobs.jobs.schema import t


class ChildBroke(UltimateError):
    code = "X_APP_CHILD_BROKE"


register_error_retry({ChildBroke.code: "terminal"})


@job(
    name="children.leaf",
    input=t.object(n=t.number.int(), org=t.string, fail=t.optional(t.boolean)),
    idempotency_key=lambda i: str(i.n),
    tenant=lambda i: i.org,
    retry=Retry(attempts=2),
)
async def leaf(run: Run[Any]) -> Any:
    """A child: returns its number doubled, or fails with an app code when told to."""
    if run.input.fail:
        raise ChildBroke("told to fail")
    return {"double": run.input.n * 2}


@job(
    name="children.parent",
    input=t.object(
        key=t.string,
        org=t.string,
        count=t.number.int(),
        fail=t.optional(t.array(t.number.int())),
        detached=t.optional(t.number.int()),
        foreign=t.optional(t.string),
    ),
    idempotency_key=lambda i: i.key,
    tenant=lambda i: i.org,
    retry=Retry(attempts=3),
    event_poll="1h",
)
async def parent(run: Run[Any]) -> Any:
    """Fans out ``count`` leaves (the first ``detached`` of them detached) and gathers them."""
    given = run.input
    kids = [
        await run.step.enqueue(
            leaf,
            {"n": n, "org": given.org, "fail": n in (given.fail or [])},
            detached=n < (given.detached or 0),
        )
        for n in range(given.count)
    ]
    if given.foreign:
        kids.append(given.foreign)
    results = await run.step.gather(kids)
    return {"sum": sum(r["double"] for r in results)}


@job(
    name="children.single",
    input=t.object(key=t.string, timeout=t.optional(t.string)),
    idempotency_key=lambda i: i.key,
    tenant="none",
    event_poll="1h",
)
async def single(run: Run[Any]) -> Any:
    """Waits on one child with a timeout (the child's tenant is its own: this parent has none)."""
    child = await run.step.enqueue(leaf, {"n": 7, "org": "org-s"})
    return await run.step.wait(child, timeout=run.input.timeout or "1h")


@job(
    name="children.trespasser",
    input=t.object(key=t.string),
    idempotency_key=lambda i: i.key,
    tenant=lambda i: "org-a",
)
async def trespasser(run: Run[Any]) -> Any:
    """A parent of org-a enqueuing a child whose input names org-b."""
    return await run.step.enqueue(leaf, {"n": 1, "org": "org-b"})


@job(
    name="children.batch",
    input=t.object(key=t.string, org=t.string, count=t.number.int()),
    idempotency_key=lambda i: i.key,
    tenant=lambda i: i.org,
    event_poll="1h",
)
async def batch_parent(run: Run[Any]) -> Any:
    """Fans out ``count`` leaves as ONE step (``enqueue_many``) and gathers them."""
    given = run.input
    kids = await run.step.enqueue_many(
        leaf, [{"n": n, "org": given.org} for n in range(given.count)]
    )
    results = await run.step.gather(kids)
    return {"sum": sum(r["double"] for r in results)}


@job(
    name="children.prioritised",
    input=t.object(key=t.string, org=t.string),
    idempotency_key=lambda i: i.key,
    tenant=lambda i: i.org,
)
async def prioritised_parent(run: Run[Any]) -> Any:
    """Enqueues one child at priority 2 and a batch of two at priority 6; answers their ids."""
    one = await run.step.enqueue(leaf, {"n": 1, "org": run.input.org}, priority=2)
    many = await run.step.enqueue_many(
        leaf, [{"n": 2, "org": run.input.org}, {"n": 3, "org": run.input.org}], priority=6
    )
    return {"one": one, "many": many}


HANDLES: dict[str, JobHandle[Any]] = {
    h.name: h for h in (leaf, parent, single, trespasser, batch_parent, prioritised_parent)
}


async def due(driver: JobDriver, *, limit: int = 1_000, worker: str = "w1") -> list[ClaimedJob]:
    return await driver.claim(ClaimOptions(queues=["default"], limit=limit, worker_id=worker))


async def run_claimed(driver: JobDriver, claimed: ClaimedJob) -> JobExecution:
    return await execute_job(claimed, driver=driver, handle=HANDLES[claimed.name], context=None)


async def run_due(driver: JobDriver) -> list[JobExecution]:
    """One attempt of every row due now, in hand-out order."""
    return [await run_claimed(driver, c) for c in await due(driver)]


async def parent_row(driver: JobDriver, job_id: str) -> JobRow:
    introspect = driver.introspect
    assert introspect is not None
    found = await introspect.get(job_id)
    assert found is not None
    return found


async def child_ids(children: JobChildren, parent_id: str) -> list[str]:
    page = await children.list(parent_id, limit=10_000)
    return [c.id for c in page.children]
