"""The operator surface as functions: what ``ujobs jobs``, the api and a dashboard call.

Each function reads or moves rows ONLY through ``driver.introspect`` (plus the core
``load_steps`` / ``stats`` reads), and answers a JSON-shaped ``dict`` — camelCase keys, epoch
milliseconds for instants — so the CLI's ``--json``, an HTTP body and an MCP tool print the
same document. A driver with no introspection (Redis) answers ``X_NOT_IMPLEMENTED`` naming
the Postgres driver, never an ``AttributeError``.

Redaction: a job's input is the caller's data — personal details, tokens a partner handed over —
and an operator listing dead letters needs its SHAPE far more often than its values. So
``inspect_job`` shows the input's keys with every value masked unless ``show_input=True``, and
never shows a step's output (what the step returned may be a secret the body fetched) unless
``show_output=True``. ``list`` rows carry no input at all.

The idempotency key is masked with the input: it is computed FROM the input
(``f"mail:{i.to}:{i.subject}"``), so a key shown beside a redacted input would print the very
values the redaction hides. Only ``show_input=True`` shows it, as it shows the input; a list,
which carries no input, masks it too. Every face (``ujobs jobs``, the api, the dashboard) reads
these projections, so they all mask alike.

``last_error`` carries the attempt's stack, which names the server's paths and code: the
projections take ``error_detail``, and a face serving a tenant's token passes False so the
tenant reads the error's code and message (``error_summary``); operators keep the stack.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from ujobs.drivers.base import (
    AttemptError,
    BulkFilter,
    BulkResult,
    JobDriver,
    JobFilter,
    JobIntrospection,
    JobPage,
    JobRow,
    QueueStats,
    StepRecord,
    WorkerRow,
    require_introspection,
)
from ujobs.drivers.children import MAX_CHILDREN_LISTED, children_of
from ujobs.drivers.fairness import TenantWeights, check_tenant, check_weight, weights_of
from ujobs.errors import (
    CancelUnsupportedError,
    JobIdAmbiguousError,
    JobNotCancellableError,
    JobNotFoundError,
    NotImplementedByDriverError,
    StepNotFoundError,
)
from ujobs.execution.settle import error_summary
from ujobs.masking import MASK, redact_key

FULL_ID_LENGTH = 36
SHORT_ID_LENGTH = 18
"""What ``short_id`` keeps: the UUIDv7's millisecond and its per-process counter, unique among
the ids one process minted (the random tail tells processes apart; a clash is ambiguous)."""
AMBIGUOUS_LISTED = 10
MAX_REDACTED_ITEMS = 20
"""A redacted list shows at most this many masked items, then how many more there were."""


def introspection_of(driver: JobDriver) -> JobIntrospection:
    """``driver.introspect``, or ``X_NOT_IMPLEMENTED`` naming the Postgres driver."""
    return require_introspection(driver)


# --- projections --------------------------------------------------------------------------


def redact_input(value: Any) -> Any:
    """The input's shape with every leaf value masked: keys stay, values go."""
    if isinstance(value, Mapping):
        return {str(k): redact_input(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        shown: list[Any] = [redact_input(v) for v in value[:MAX_REDACTED_ITEMS]]
        if len(value) > MAX_REDACTED_ITEMS:
            shown.append(f"… {len(value) - MAX_REDACTED_ITEMS} more")
        return shown
    return None if value is None else MASK


def job_json(row: JobRow, *, input_: str = "omit", error_detail: bool = True) -> dict[str, Any]:
    """A job row as JSON. ``input_``: ``omit`` (lists), ``redacted`` or ``shown``; the
    idempotency key is shown only with the input (``shown``). ``error_detail=False``: the last
    error without its stack (a tenant's view)."""
    key = row.idempotency_key if input_ == "shown" else redact_key(row.idempotency_key)
    doc: dict[str, Any] = {
        "id": row.id,
        "runId": row.run_id,
        "name": row.name,
        "queue": row.queue,
        "state": row.state,
        "tenantId": row.tenant_id,
        "idempotencyKey": key,
        "attempt": row.attempt,
        "maxAttempts": row.max_attempts,
        "runAtMs": row.run_at_ms,
        "createdAtMs": row.created_at_ms,
        "updatedAtMs": row.updated_at_ms,
        "finishedAtMs": row.finished_at_ms,
        "claimedBy": row.claimed_by,
        "leaseExpiresAtMs": row.lease_expires_at_ms,
        "progress": row.progress,
        "lastError": row.last_error if error_detail else error_summary(row.last_error),
        "traceparent": row.traceparent,
        "enqueuedBy": row.enqueued_by,
        "priority": row.priority,
    }
    if input_ == "redacted":
        doc["input"] = redact_input(row.input)
        doc["inputRedacted"] = True
    elif input_ == "shown":
        doc["input"] = row.input
        doc["inputRedacted"] = False
    return doc


def step_json(step: StepRecord, *, show_output: bool) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "name": step.name,
        "seq": step.seq,
        "startedAtMs": step.started_at_ms,
        "finishedAtMs": step.finished_at_ms,
        "durationMs": max(0, step.finished_at_ms - step.started_at_ms),
    }
    if show_output:
        doc["output"] = step.output
    return doc


def attempt_json(attempt: AttemptError, *, error_detail: bool = True) -> dict[str, Any]:
    """A failed attempt: its number, when it was settled, its error (without the stack for a
    tenant, as ``lastError``)."""
    return {
        "attempt": attempt.attempt,
        "atMs": attempt.at_ms,
        "error": attempt.error if error_detail else error_summary(attempt.error),
    }


def page_json(page: JobPage, *, error_detail: bool = True) -> dict[str, Any]:
    return {
        "jobs": [job_json(r, error_detail=error_detail) for r in page.rows],
        "limit": page.limit,
        "last": page.is_last,
        "next": None if page.is_last else page.next_cursor,
        "prev": page.prev_cursor,
    }


def worker_json(row: WorkerRow) -> dict[str, Any]:
    return {
        "id": row.id,
        "host": row.host,
        "pid": row.pid,
        "startedAtMs": row.started_at_ms,
        "queues": list(row.queues),
        "slots": row.slots,
        "inFlight": list(row.in_flight),
        "lastHeartbeatMs": row.last_heartbeat_ms,
        "expiresAtMs": row.expires_at_ms,
        "drainingAtMs": row.draining_at_ms,
    }


def queue_json(q: QueueStats, now_ms: int) -> dict[str, Any]:
    oldest = q.oldest_due_run_at_ms
    return {
        "queue": q.queue,
        "paused": q.paused,
        "ready": q.ready,
        "delayed": q.delayed,
        "running": q.running,
        "suspended": q.suspended,
        "due": q.due,
        "oldestDueAgeMs": None if oldest is None else max(0, now_ms - oldest),
        "done": q.done,
        "failed": q.failed,
        "dead": q.dead,
        "cancelled": q.cancelled,
        "capped": sorted(q.capped),
    }


def bulk_json(result: BulkResult) -> dict[str, int]:
    return {"affected": result.affected, "remaining": result.remaining}


# --- reads ----------------------------------------------------------------------------------


async def list_jobs(
    driver: JobDriver, flt: JobFilter, *, error_detail: bool = True
) -> dict[str, Any]:
    return page_json(await introspection_of(driver).list(flt), error_detail=error_detail)


def short_id(job_id: str) -> str:
    """The id as people read it (``ujobs dev``'s narration); every command taking an id
    accepts it back (``resolve_job_id``)."""
    return job_id[:SHORT_ID_LENGTH]


async def resolve_job_id(driver: JobDriver, given: str) -> str:
    """A full id as is; a shorter one is the unique id it starts (ignoring case).

    None starting it: ``X_JOB_NOT_FOUND``; several: ``X_JOB_ID_AMBIGUOUS`` listing them."""
    text = given.strip()
    if len(text) >= FULL_ID_LENGTH or not text:
        return text
    page = await introspection_of(driver).list(
        JobFilter(id_prefix=text, limit=AMBIGUOUS_LISTED + 1)
    )
    if not page.rows:
        raise JobNotFoundError(
            f"no job's id starts with {text!r}; find it with `ujobs jobs list --json`",
            meta={"id": text},
        )
    if len(page.rows) > 1:
        listed = page.rows[:AMBIGUOUS_LISTED]
        more = " and more" if len(page.rows) > AMBIGUOUS_LISTED else ""
        raise JobIdAmbiguousError(
            f"{text!r} starts {len(listed)}{more} job ids: "
            + ", ".join(f"{r.id} ({r.name})" for r in listed)
            + "; give more of the id",
            meta={"id": text, "matches": [r.id for r in listed]},
        )
    return page.rows[0].id


async def get_job(driver: JobDriver, job_id: str) -> JobRow:
    row = await introspection_of(driver).get(job_id)
    if row is None:
        raise JobNotFoundError(
            f"no job has the id {job_id!r}; find it with `ujobs jobs list --json`",
            meta={"id": job_id},
        )
    return row


async def inspect_job(
    driver: JobDriver, job_id: str, *, show_input: bool = False, show_output: bool = False
) -> dict[str, Any]:
    """The job, its steps in save order, its progress and last error (input redacted)."""
    row = await get_job(driver, job_id)
    return await job_document(driver, row, show_input=show_input, show_output=show_output)


async def job_document(
    driver: JobDriver,
    row: JobRow,
    *,
    show_input: bool = False,
    show_output: bool = False,
    error_detail: bool = True,
    show_result: bool | None = None,
) -> dict[str, Any]:
    """``inspect_job``'s document for a row already read (the api reads it first to check
    the caller's tenant). ``result`` is the body's return value once ``done`` (null before):
    shown with ``show_result`` (default: as the step outputs, ``show_output``), else masked
    like the input (``resultRedacted``); the api and the dashboard show it to whoever may
    read the job."""
    steps = await driver.load_steps(row.run_id, tenant_id=row.tenant_id)
    doc = job_json(row, input_="shown" if show_input else "redacted", error_detail=error_detail)
    result = row.result if row.state == "done" else None
    if (show_output if show_result is None else show_result) or result is None:
        doc["result"] = result
    else:
        doc["result"] = redact_input(result)
        doc["resultRedacted"] = True
    doc["steps"] = [step_json(s, show_output=show_output) for s in steps]
    doc["parentId"] = row.parent_id
    doc["children"] = await children_json(driver, row.id)
    attempts = await introspection_of(driver).attempt_errors(row.id)
    doc["attempts"] = [attempt_json(a, error_detail=error_detail) for a in attempts]
    return doc


async def children_json(driver: JobDriver, job_id: str) -> dict[str, Any] | None:
    """The job's children for its page: the first ``MAX_CHILDREN_LISTED`` in enqueue order and
    how many there are; None on a driver that keeps no children."""
    children = children_of(driver)
    if children is None:
        return None
    page = await children.list(job_id, limit=MAX_CHILDREN_LISTED)
    return {
        "items": [
            {"id": c.id, "name": c.name, "state": c.state, "createdAtMs": c.created_at_ms}
            for c in page.children
        ],
        "total": page.total,
    }


async def inspect_queues(driver: JobDriver, now_ms: int) -> list[dict[str, Any]]:
    """Every queue with rows or a pause, by name: counts per state, due, oldest due age."""
    stats = await driver.stats()
    queues = dict(stats.queues)
    introspect = driver.introspect
    if introspect is not None:
        for name in await introspect.paused_queues():
            if name not in queues:
                queues[name] = QueueStats(queue=name, paused=True)
    return [queue_json(queues[name], now_ms) for name in sorted(queues)]


TENANTS_READ = 10_000
"""The most due rows ``inspect_queue`` reads to say whose work waits (the first in hand-out
order: by priority, then oldest): past it the per-tenant counts are lower bounds
(``tenantsCapped``)."""

TOP_TENANTS = 10
"""How many tenants ``inspect_queue`` lists, the most due work first."""


async def inspect_queue(
    driver: JobDriver, queue: str, now_ms: int, *, top: int = TOP_TENANTS
) -> dict[str, Any]:
    """One queue as ``inspect_queues`` shows it, plus whose due work waits in it: the ``top``
    tenants by due rows among the first ``TENANTS_READ`` in hand-out order, each with its
    oldest due age (jobs without a tenant are one row, ``tenantId`` null). A queue with no rows
    answers zeros."""
    introspect = introspection_of(driver)
    stats = (await driver.stats()).queues.get(queue) or QueueStats(queue=queue)
    if queue in await introspect.paused_queues():
        stats = replace(stats, paused=True)
    found = await introspect.queue_tenants(queue, now_ms, cap=TENANTS_READ, top=top)
    doc = queue_json(stats, now_ms)
    doc["tenants"] = [
        {
            "tenantId": t.tenant_id,
            "due": t.due,
            "oldestDueAgeMs": max(0, now_ms - t.oldest_due_ms),
        }
        for t in found.tenants
    ]
    doc["tenantsCapped"] = found.capped
    return doc


async def list_workers(driver: JobDriver) -> list[dict[str, Any]]:
    return [worker_json(w) for w in await introspection_of(driver).workers()]


# --- moves ----------------------------------------------------------------------------------


async def cancel_job(
    driver: JobDriver, job_id: str, reason: str | None = None, *, detach_children: bool = False
) -> JobRow:
    """Stop a live job; a finished or unknown one is ``X_JOB_NOT_CANCELLABLE``, and so is any
    job on a driver with no ``cancel`` (the spec's answer; it names the Postgres driver).
    Its live children (and theirs) go with it unless enqueued detached, or all are kept with
    ``detach_children``."""
    if driver.introspect is None:
        raise CancelUnsupportedError(
            "this queue's driver cannot cancel a job (it has no operator surface); run the "
            "queue on the Postgres driver (UJOBS_DRIVER=postgres) to cancel jobs",
            meta={"id": job_id},
        )
    row = await introspection_of(driver).cancel(job_id, reason, detach_children=detach_children)
    if row is None:
        raise JobNotCancellableError(
            f"job {job_id!r} is not live (done, failed, dead, cancelled or unknown); "
            "`ujobs jobs show` says which",
            meta={"id": job_id},
        )
    return row


async def retry_job(driver: JobDriver, job_id: str, *, from_step: str | None = None) -> JobRow:
    """Re-queue one finished job; ``from_step`` drops that step and every later one — a step
    the run never recorded is ``X_STEP_NOT_FOUND`` listing those it did, never a plain retry."""
    if from_step is not None:
        row = await get_job(driver, job_id)
        recorded = [s.name for s in await driver.load_steps(row.run_id, tenant_id=row.tenant_id)]
        if from_step not in recorded:
            shown = ", ".join(recorded) if recorded else "none"
            raise StepNotFoundError(
                f"job {job_id!r} recorded no step {from_step!r} (recorded: {shown}); "
                "pick one of those, or retry without --from-step",
                meta={"id": job_id, "step": from_step, "recorded": recorded},
            )
    return await introspection_of(driver).requeue(job_id, from_step=from_step)


async def remove_job(driver: JobDriver, job_id: str) -> None:
    if not await introspection_of(driver).remove(job_id):
        raise JobNotFoundError(
            f"no job has the id {job_id!r}; find it with `ujobs jobs list --json`",
            meta={"id": job_id},
        )


async def promote_job(driver: JobDriver, job_id: str) -> JobRow:
    return await introspection_of(driver).promote(job_id)


async def bulk_move(driver: JobDriver, action: str, flt: BulkFilter) -> BulkResult:
    """One call of ``requeue_many`` / ``remove_many`` / ``promote_many`` (``action``)."""
    introspect = introspection_of(driver)
    moves = {
        "retry": introspect.requeue_many,
        "remove": introspect.remove_many,
        "promote": introspect.promote_many,
    }
    return await moves[action](flt)


async def pause_queues(driver: JobDriver, queues: Sequence[str], *, pause: bool) -> None:
    introspect = introspection_of(driver)
    for queue in queues:
        if pause:
            await introspect.pause_queue(queue)
        else:
            await introspect.resume_queue(queue)


async def pause_tasks(driver: JobDriver, tasks: Sequence[str], *, pause: bool) -> None:
    introspect = introspection_of(driver)
    for task in tasks:
        if pause:
            await introspect.pause_task(task)
        else:
            await introspect.resume_task(task)


# --- tenant weights (ujobs.drivers.fairness) -------------------------------------------------


def _weights(driver: JobDriver) -> TenantWeights:
    weights = weights_of(driver)
    if weights is None:
        raise NotImplementedByDriverError(
            f"the {driver.name} driver stores no tenant weights",
            meta={"driver": driver.name, "capability": "weights"},
        )
    return weights


async def tenant_weight(driver: JobDriver, tenant_id: str) -> dict[str, Any]:
    """``{"tenantId", "weight"}``: the tenant's share in a contended fair claim (1 unless an
    operator set another). ``ujobs tenants weight <tenant>``, ``GET /v1/tenants/{t}/weight``."""
    tenant = check_tenant(tenant_id)
    return {"tenantId": tenant, "weight": await _weights(driver).weight(tenant)}


async def set_tenant_weight(driver: JobDriver, tenant_id: str, weight: object) -> dict[str, Any]:
    """Set a tenant's weight (1..1000), effective from the next claim of every worker.
    ``ujobs tenants weight <tenant> <n>``, ``PUT /v1/tenants/{t}/weight``."""
    tenant, checked = check_tenant(tenant_id), check_weight(weight)
    return {"tenantId": tenant, "weight": await _weights(driver).set_weight(tenant, checked)}
