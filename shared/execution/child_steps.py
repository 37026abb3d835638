"""``run.step.enqueue`` / ``run.step.wait`` / ``run.step.gather``: children as durable steps.

* **An enqueue is a step whose output is the child's id.** The child's id and idempotency key
  are derived from the parent (its job id, run id and tenant) and the step's name, so a replay
  after a crash between the child's insert and the step's save meets the row the first attempt
  made: every driver's enqueue inserts nothing under an id that already names a row. The
  child records its parent (``parent_id``) and runs under the parent's tenant: a child job
  whose ``tenant(input)`` names another tenant is ``X_JOB_TENANT_MISMATCH``. Debounce and
  ``unique_for`` do not apply to a child (its key is its own).
* **A wait parks the parent without holding a process**, as ``wait_for_event`` does: it marks
  the children it waits for (``ujobs.drivers.children``: a child enqueued as a step is born
  marked) and, when the tally says one is still live and none ended badly, raises
  ``StepSuspension`` without reading them; otherwise it reads them and answers or raises.
  The settle of the LAST waited child makes the parent due again (one wake per wait, not one
  per child); a poll of ``event_poll_ms`` is the safety net
  for a settle that announces nothing (a child buried by a lapsed lease on its final attempt).
* **Answers.** ``wait`` answers the child's result; ``gather`` the list of results in the
  order asked. Both are stored as the step's output, so a replay answers them again. A child
  that ended dead, failed or cancelled raises ``ChildFailedError`` (``X_CHILD_FAILED``) with
  the child's failure (its own code) as ``__cause__``; an id that is not this run's child
  (another tenant's job included) raises ``X_JOB_NOT_FOUND``, exactly as a missing one.
  ``timeout`` counts from the wait's first attempt (stored as ``'<name>#wait-start'``) and
  raises ``X_JOB_TIMEOUT`` on the ordinary retry path.
* **Many at once.** ``enqueue_many(job, inputs)`` is ONE step for a fan-out (its output the
  children's ids in input order), inserted ``MAX_BULK_ROWS`` to a statement: a thousand
  children cost one statement and one step save, not a thousand of each.
* **Names.** ``enqueue`` is named ``'enqueue:<job>#<n>'``, ``enqueue_many``
  ``'enqueue_many:<job>#<n>'`` (the n-th enqueue of that job in the
  attempt: deterministic for a deterministic body), ``wait`` ``'wait:<child id>'``, ``gather``
  ``'gather:<digest of the ids>'``; ``step=`` names one explicitly.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ujobs.drivers.base import MAX_BULK_ROWS, EnqueueRequest, JobRow, announces_enqueues
from ujobs.drivers.children import MAX_WAITED_CHILDREN, JobChildren, children_of
from ujobs.durations import Duration, duration_ms
from ujobs.errors import (
    ChildFailedError,
    DriverUnsupportedError,
    InvariantError,
    JobNotFoundError,
    JobTenantMismatchError,
    JobTimeoutError,
)
from ujobs.execution.run import ChildJob
from ujobs.execution.step_output import copy_output
from ujobs.ids import derived_id, new_ids

if TYPE_CHECKING:
    from ujobs.execution.steps import Step

ENDED_BADLY = frozenset({"dead", "failed", "cancelled"})
WAIT_START_SUFFIX = "#wait-start"


def _id_ms(job_id: str) -> int:
    """The time a UUIDv7 parent id carries (0 for an id of another shape): the child's id then
    sorts near its parent's."""
    head = job_id.replace("-", "")[:12]
    try:
        return int(head, 16) if len(head) == 12 else 0
    except ValueError:
        return 0


def _capability(step: Step) -> JobChildren:
    children = children_of(step.driver)
    if children is None:
        raise DriverUnsupportedError(
            f"the {step.driver.name} driver keeps no children: run.step.enqueue, wait and "
            "gather need the Postgres or memory driver",
            meta={"driver": step.driver.name, "capability": "children"},
        )
    return children


def _child_request(
    step: Step,
    job: ChildJob,
    input: Any,
    child_id: str,
    *,
    delay: Duration | None,
    queue: str | None,
    run_id: str | None = None,
    priority: int | None = None,
) -> EnqueueRequest:
    """The child's request: its derived id as its id and key, under the parent's tenant."""
    request = job.request(
        input,
        job_id=child_id,
        delay=delay,
        queue=queue,
        idempotency_key=child_id,
        priority=priority,
    )
    tenant = step.tenant_id
    if tenant is not None and request.tenant_id not in (None, tenant):
        raise JobTenantMismatchError(
            f"child job {job.name!r}: its input names tenant {request.tenant_id!r} but its "
            f"parent runs for {tenant!r}; a child runs under its parent's tenant",
            meta={"job": job.name, "tenant": request.tenant_id, "parent_tenant": tenant},
        )
    return dataclasses.replace(
        request,
        tenant_id=tenant if tenant is not None else request.tenant_id,
        debounce_ms=None,
        unique_for_ms=None,
        run_id=run_id if run_id is not None else request.run_id,
    )


def _child_id(step: Step, name: str, *index: str) -> str:
    parent = step.job_id
    return derived_id(
        _id_ms(parent), "child", parent, step.run_id, step.tenant_id or "", name, *index
    )


async def enqueue_children(
    step: Step,
    job: ChildJob,
    inputs: Sequence[Any],
    *,
    name: str | None,
    detached: bool,
    delay: Duration | None,
    queue: str | None,
    priority: int | None = None,
) -> list[str]:
    """The children's ids, in input order (``run.step.enqueue_many``): one step, one
    statement per ``MAX_BULK_ROWS`` children."""
    if isinstance(inputs, str | bytes) or not isinstance(inputs, Sequence):
        raise InvariantError("enqueue_many takes a list of inputs")
    if not inputs or len(inputs) > MAX_WAITED_CHILDREN:
        raise InvariantError(
            f"enqueue_many takes between 1 and {MAX_WAITED_CHILDREN} inputs, got {len(inputs)}",
            meta={"count": len(inputs), "max": MAX_WAITED_CHILDREN},
        )
    if name is None:
        name = step.default_enqueue_name(job.name, many=True)
    checked = step.enter(name)
    record = (await step.records()).get(checked)
    if record is not None:
        step.replayed.append(checked)
        return [str(child) for child in record.output]
    children = _capability(step)
    step.ensure_writable(checked)
    started = step.clock.now_ms()
    run_ids = new_ids(len(inputs))
    requests = [
        _child_request(
            step,
            job,
            value,
            _child_id(step, checked, str(i)),
            delay=delay,
            queue=queue,
            run_id=run_ids[i],
            priority=priority,
        )
        for i, value in enumerate(inputs)
    ]
    ids: list[str] = []
    for start in range(0, len(requests), MAX_BULK_ROWS):
        chunk = requests[start : start + MAX_BULK_ROWS]
        answer = await children.enqueue_many(chunk, parent_id=step.job_id, detached=detached)
        if answer is None:
            raise JobNotFoundError(
                f"the parent job {step.job_id!r} is gone; its children were not enqueued",
                meta={"id": step.job_id},
            )
        ids.extend(answer)
    if announces_enqueues(step.driver):
        step.driver.announce(requests[0].queue)  # type: ignore[attr-defined]
    await step.save(checked, ids, started, started=True)
    step.ran.append(checked)
    return ids


async def enqueue_child(
    step: Step,
    job: ChildJob,
    input: Any,
    *,
    name: str | None,
    detached: bool,
    delay: Duration | None,
    queue: str | None,
    priority: int | None = None,
) -> str:
    """The child's id (``run.step.enqueue``; see the module docstring)."""
    if name is None:
        name = step.default_enqueue_name(job.name)
    checked = step.enter(name)
    record = (await step.records()).get(checked)
    if record is not None:
        step.replayed.append(checked)
        return str(record.output)
    children = _capability(step)
    step.ensure_writable(checked)
    started = step.clock.now_ms()
    parent = step.job_id
    request = _child_request(
        step, job, input, _child_id(step, checked), delay=delay, queue=queue, priority=priority
    )
    answer = await children.enqueue(request, parent_id=parent, detached=detached)
    if answer is None:
        raise JobNotFoundError(
            f"the parent job {parent!r} is gone; its child was not enqueued", meta={"id": parent}
        )
    if not answer.deduped and announces_enqueues(step.driver):
        step.driver.announce(request.queue)  # type: ignore[attr-defined]
    await step.save(checked, answer.id, started, started=True)
    step.ran.append(checked)
    return answer.id


def checked_ids(children: Any) -> list[str]:
    if isinstance(children, str) or not isinstance(children, Sequence):
        raise InvariantError("gather takes a list of child ids (what run.step.enqueue answered)")
    ids = list(children)
    if not ids or len(ids) > MAX_WAITED_CHILDREN:
        raise InvariantError(
            f"gather takes between 1 and {MAX_WAITED_CHILDREN} child ids, got {len(ids)}",
            meta={"count": len(ids), "max": MAX_WAITED_CHILDREN},
        )
    for child in ids:
        if not isinstance(child, str) or not child or len(child) > 200:
            raise InvariantError(f"a child id must be a non-empty string, got {child!r}")
    return ids


def gather_name(ids: Sequence[str]) -> str:
    digest = hashlib.sha256("\n".join(ids).encode()).hexdigest()[:24]
    return f"gather:{digest}"


async def wait_children(
    step: Step, ids: list[str], *, name: str, timeout: Duration | None
) -> list[Any]:
    """The results of the children ``ids`` once all are done (see the module docstring)."""
    checked = step.enter(name)
    timeout_ms = None if timeout is None else duration_ms(timeout, field="wait timeout")
    record = (await step.records()).get(checked)
    if record is not None:
        step.replayed.append(checked)
        return list(copy_output(record.output))
    children = _capability(step)
    step.ensure_writable(checked)
    began = await _wait_start(step, checked) if timeout_ms is not None else None
    tally = await children.mark(step.job_id, ids)
    if tally.found == len(set(ids)) and tally.live and not tally.ended_badly:
        raise _park(step, checked, timeout_ms, began)  # none to read: a thousand rows spared
    rows = {row.id: row for row in await children.read(step.job_id, ids)}
    live = False
    for child in ids:
        row = rows.get(child)
        if row is None:
            raise JobNotFoundError(
                f"step {checked!r}: job {child!r} is not a child of this run",
                meta={"step": checked, "id": child},
            )
        if row.state in ENDED_BADLY:
            raise _child_failed(checked, row)
        live = live or row.state != "done"
    if not live:
        now = step.clock.now_ms()
        output = [rows[child].result for child in ids]
        await step.save(checked, output, began if began is not None else now, started=True)
        step.ran.append(checked)
        return list(copy_output(output))
    raise _park(step, checked, timeout_ms, began)


def _park(step: Step, name: str, timeout_ms: int | None, began: int | None) -> BaseException:
    """The suspension of a wait with children still live (``X_JOB_TIMEOUT`` past its
    timeout): until the poll, or the timeout when that comes first."""
    now = step.clock.now_ms()
    park = step.event_poll_ms
    if timeout_ms is not None and began is not None:
        if now >= began + timeout_ms:
            return JobTimeoutError(
                f"step {name!r} waited {timeout_ms} ms for its children and one is still live",
                meta={"step": name, "timeoutMs": timeout_ms},
            )
        park = min(park, began + timeout_ms - now)
    return step.suspend(name, now + park)


async def _wait_start(step: Step, name: str) -> int:
    """When the wait began (the worker's clock), stored once so it survives parking."""
    marker = f"{name}{WAIT_START_SUFFIX}"
    record = (await step.records()).get(marker)
    if record is not None and isinstance(record.output, dict):
        began = record.output.get("startedAtMs")
        if isinstance(began, int) and not isinstance(began, bool):
            return began
    now = step.clock.now_ms()
    await step.save(marker, {"startedAtMs": now}, now)
    return now


def _child_failed(name: str, row: JobRow) -> ChildFailedError:
    # Imported here: result_read sits in the jobs layer, above the step runner.
    from ujobs.jobs.result_read import failure_of

    cause = failure_of(row)
    error = ChildFailedError(
        f"step {name!r}: child {row.name!r} ({row.id}) ended {row.state} ({cause.code})",
        meta={
            "step": name,
            "childId": row.id,
            "name": row.name,
            "state": row.state,
            "childCode": cause.code,
        },
    )
    error.__cause__ = cause
    return error


__all__ = [
    "ChildJob",
    "checked_ids",
    "enqueue_child",
    "enqueue_children",
    "gather_name",
    "wait_children",
]
