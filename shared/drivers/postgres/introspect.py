"""The operator surface (``JobIntrospection``) over ``x_jobs`` and its side tables.

Each member is one named statement; the statements answer enough (the row's prior state,
whether a live row holds its key) for the refusal to be the right ``X_…`` code without a
second round trip. Bulk members move at most ``MAX_BULK_ROWS`` rows per call and answer
``{affected, remaining}``, ``remaining`` being what a second call could still move.
"""

from __future__ import annotations

import builtins
from typing import TYPE_CHECKING, Any

import asyncpg
import orjson

from ujobs.clock import Clock
from ujobs.drivers.base import (
    COUNTER_TIERS,
    MAX_BULK_ROWS,
    MAX_TASK_FIRES,
    PROMOTABLE_STATES,
    REQUEUEABLE_STATES,
    AttemptError,
    BulkFilter,
    BulkResult,
    ClaimRef,
    CounterBucket,
    CounterTotals,
    JobFilter,
    JobPage,
    JobRow,
    QueueTenants,
    TaskFire,
    TenantBacklog,
    WorkerRow,
    validate_job_filter,
)
from ujobs.drivers.postgres.progress import ProgressThrottle
from ujobs.drivers.postgres.rows import dumps, job_row, worker_row
from ujobs.drivers.postgres.sql import query
from ujobs.errors import (
    JobDuplicateError,
    JobNotFoundError,
    JobNotPromotableError,
    JobNotRemovableError,
    JobNotRequeueableError,
)

if TYPE_CHECKING:
    Pool = asyncpg.Pool[Any]
JSONValue = Any

_GET = query("get_job")
_QUEUE_TENANTS = query("queue_tenants")
_ATTEMPT_ERRORS = query("attempt_errors")
_LIST = query("list_jobs")
_LIST_BEFORE = query("list_jobs_before")
_CANCEL = query("cancel_job")
_REQUEUE = query("requeue_job")
_PROMOTE = query("promote_job")
_REMOVE = query("remove_job")
_REQUEUE_MANY = query("requeue_many")
_REMOVE_MANY = query("remove_many")
_PROMOTE_MANY = query("promote_many")
_PAUSE = query("pause")
_RESUME = query("resume")
_PAUSED = query("paused")
_WORKERS = query("workers")
_COUNTERS = query("counters")
_COUNTER_TOTALS = query("counter_totals")
_ROLLUP = query("rollup_counters")
_PROGRESS = query("record_progress")
_TASK_FIRES = query("task_fires")
_RECORD_TASK_FIRE = query("record_task_fire")

OPERATION_QUERIES: dict[str, tuple[str, ...]] = {
    "list": ("list_jobs", "list_jobs_before"),
    "get": ("get_job",),
    "queue_tenants": ("queue_tenants",),
    "attempt_errors": ("attempt_errors",),
    "remove": ("remove_job",),
    "requeue": ("requeue_job",),
    "cancel": ("cancel_job",),
    "promote": ("promote_job",),
    "requeue_many": ("requeue_many",),
    "remove_many": ("remove_many",),
    "promote_many": ("promote_many",),
    "pause_queue": ("pause",),
    "resume_queue": ("resume",),
    "paused_queues": ("paused",),
    "pause_task": ("pause",),
    "resume_task": ("resume",),
    "paused_tasks": ("paused",),
    "workers": ("workers",),
    "counters": ("counters",),
    "counter_totals": ("counter_totals",),
    "rollup_counters": ("rollup_counters",),
    "record_progress": ("record_progress",),
    "task_fires": ("task_fires",),
    "record_task_fire": ("record_task_fire",),
}


def _not_found(job_id: str) -> JobNotFoundError:
    return JobNotFoundError(
        f"no job {job_id!r} in the queue; find it with `ujobs jobs list --json`",
        meta={"id": job_id},
    )


class PostgresIntrospection:
    """``JobIntrospection`` for the Postgres driver (``driver.introspect``)."""

    def __init__(
        self, pool: Pool, clock: Clock, progress: ProgressThrottle, *, settlements: bool = False
    ) -> None:
        self._pool = pool
        self._clock = clock
        self._progress = progress
        self._settlements = settlements

    # -- reading -------------------------------------------------------------------------
    async def list(self, flt: JobFilter) -> JobPage:
        limit, after, before = validate_job_filter(flt)
        args: tuple[Any, ...] = (
            flt.queue,
            flt.name,
            flt.state,
            flt.tenant_id,
            flt.id_prefix,
            flt.created_from_ms,
            flt.created_to_ms,
        )
        if before is not None:
            rows = await self._pool.fetch(_LIST_BEFORE, *args, before[0], before[1], limit)
            return JobPage([job_row(r) for r in reversed(rows)], limit)
        cursor = after if after is not None else (None, None)
        rows = await self._pool.fetch(_LIST, *args, cursor[0], cursor[1], limit)
        return JobPage([job_row(r) for r in rows], limit)

    async def get(self, job_id: str) -> JobRow | None:
        row = await self._pool.fetchrow(_GET, job_id)
        return None if row is None else job_row(row)

    async def attempt_errors(self, job_id: str) -> builtins.list[AttemptError]:
        text = await self._pool.fetchval(_ATTEMPT_ERRORS, job_id)
        return [
            AttemptError(attempt=e["attempt"], error=e["error"], at_ms=e["atMs"])
            for e in (orjson.loads(text) if text else [])
        ]

    # -- one job ---------------------------------------------------------------------------
    async def remove(self, job_id: str) -> bool:
        row = await self._pool.fetchrow(_REMOVE, job_id)
        assert row is not None
        if row["prior_state"] == "running":
            raise JobNotRemovableError(
                f"job {job_id!r} is running; cancel it first (ujobs jobs cancel {job_id} --json)",
                meta={"id": job_id},
            )
        return bool(row["removed"])

    async def requeue(self, job_id: str, *, from_step: str | None = None) -> JobRow:
        try:
            row = await self._pool.fetchrow(_REQUEUE, job_id, from_step, self._clock.now_ms())
        except asyncpg.UniqueViolationError as exc:
            raise _duplicate(job_id) from exc
        assert row is not None
        prior = row["prior_state"]
        if prior is None:
            raise _not_found(job_id)
        if prior not in REQUEUEABLE_STATES:
            raise JobNotRequeueableError(
                f"job {job_id!r} is {prior}; only a finished job (done, failed, dead, "
                "cancelled) can be requeued",
                meta={"id": job_id, "state": prior},
            )
        if row["held"]:
            raise _duplicate(job_id)
        return job_row(row)

    async def cancel(
        self, job_id: str, reason: str | None = None, *, detach_children: bool = False
    ) -> JobRow | None:
        # With the driver's settlements on, the cancel writes its x_settlements row
        # ('cancelled') in its own statement: the NATS edge is told of every ending. Its
        # live descendants go in the same statement unless detached (cancel_job.sql).
        row = await self._pool.fetchrow(
            _CANCEL, job_id, reason, self._clock.now_ms(), self._settlements, detach_children
        )
        return None if row is None else job_row(row)

    async def promote(self, job_id: str) -> JobRow:
        row = await self._pool.fetchrow(_PROMOTE, job_id, self._clock.now_ms())
        assert row is not None
        if row["prior_state"] is None:
            raise _not_found(job_id)
        if row["id"] is None:
            raise JobNotPromotableError(
                f"job {job_id!r} is {row['prior_state']} and not waiting on its run time",
                meta={"id": job_id, "state": row["prior_state"]},
            )
        return job_row(row)

    # -- many jobs -------------------------------------------------------------------------
    async def requeue_many(self, flt: BulkFilter) -> BulkResult:
        if flt.state not in REQUEUEABLE_STATES:
            raise JobNotRequeueableError(
                f"state {flt.state!r} is live; requeue_many takes a finished state "
                f"({', '.join(REQUEUEABLE_STATES)})",
                meta={"state": flt.state},
            )
        try:
            row = await self._pool.fetchrow(
                _REQUEUE_MANY, *_bulk_args(flt), MAX_BULK_ROWS, self._clock.now_ms()
            )
        except asyncpg.UniqueViolationError as exc:
            raise JobDuplicateError(
                "a live job took a key this requeue was moving; call again",
                meta={"state": flt.state},
            ) from exc
        assert row is not None
        return BulkResult(int(row["affected"]), max(0, int(row["remaining"])))

    async def remove_many(self, flt: BulkFilter) -> BulkResult:
        if flt.state == "running":
            raise JobNotRemovableError(
                "running jobs cannot be removed; cancel them first (ujobs jobs cancel <id>)",
                meta={"state": flt.state},
            )
        row = await self._pool.fetchrow(_REMOVE_MANY, *_bulk_args(flt), MAX_BULK_ROWS)
        assert row is not None
        return BulkResult(int(row["affected"]), max(0, int(row["remaining"])))

    async def promote_many(self, flt: BulkFilter) -> BulkResult:
        if flt.state not in PROMOTABLE_STATES:
            raise JobNotPromotableError(
                f"state {flt.state!r} never waits on a run time; promote_many takes "
                f"{' or '.join(PROMOTABLE_STATES)}",
                meta={"state": flt.state},
            )
        row = await self._pool.fetchrow(
            _PROMOTE_MANY, *_bulk_args(flt), MAX_BULK_ROWS, self._clock.now_ms()
        )
        assert row is not None
        return BulkResult(int(row["affected"]), max(0, int(row["remaining"])))

    # -- pauses ----------------------------------------------------------------------------
    async def pause_queue(self, queue: str) -> None:
        await self._pool.execute(_PAUSE, "queue", queue, self._clock.now_ms())

    async def resume_queue(self, queue: str) -> None:
        await self._pool.fetchval(_RESUME, "queue", queue)

    async def paused_queues(self) -> builtins.list[str]:
        return [r["name"] for r in await self._pool.fetch(_PAUSED, "queue")]

    async def queue_tenants(self, queue: str, now_ms: int, *, cap: int, top: int) -> QueueTenants:
        rows = await self._pool.fetch(_QUEUE_TENANTS, queue, now_ms, cap, top)
        return QueueTenants(
            tenants=tuple(
                TenantBacklog(r["tenant_id"], r["due"], r["oldest_due_ms"]) for r in rows
            ),
            capped=bool(rows and rows[0]["capped"]),
        )

    async def pause_task(self, task: str) -> None:
        await self._pool.execute(_PAUSE, "task", task, self._clock.now_ms())

    async def resume_task(self, task: str) -> None:
        await self._pool.fetchval(_RESUME, "task", task)

    async def paused_tasks(self) -> builtins.list[str]:
        return [r["name"] for r in await self._pool.fetch(_PAUSED, "task")]

    # -- fleet and history -------------------------------------------------------------------
    async def workers(self) -> builtins.list[WorkerRow]:
        return [worker_row(r) for r in await self._pool.fetch(_WORKERS, self._clock.now_ms())]

    async def counters(self, job: str, since_ms: int) -> builtins.list[CounterBucket]:
        rows = await self._pool.fetch(_COUNTERS, job, since_ms)
        return [CounterBucket(**dict(r)) for r in rows]

    async def counter_totals(self, since_ms: int) -> builtins.list[CounterTotals]:
        rows = await self._pool.fetch(_COUNTER_TOTALS, since_ms)
        return [CounterTotals(**dict(r)) for r in rows]

    async def rollup_counters(self) -> int:
        now = self._clock.now_ms()
        folded = 0
        async with self._pool.acquire() as conn, conn.transaction():
            for index, (width, keep) in enumerate(COUNTER_TIERS):
                wider = COUNTER_TIERS[index + 1][0] if index + 1 < len(COUNTER_TIERS) else None
                folded += int(await conn.fetchval(_ROLLUP, width, wider, now - keep))
        return folded

    async def record_progress(
        self, job_id: str, ref: ClaimRef, progress: JSONValue, *, force: bool = False
    ) -> bool:
        """Write ``progress`` when the run's last write is a second old (or ``force``);
        otherwise keep it for the run's settle, which writes it, and answer True."""
        text = dumps(progress)
        if not self._progress.admit(job_id, text, force=force):
            return True
        row = await self._pool.fetchval(
            _PROGRESS, job_id, ref.worker_id, ref.claim, text, self._clock.now_ms()
        )
        if row is None:
            self._progress.forget(job_id)
        return row is not None

    async def task_fires(self) -> builtins.list[TaskFire]:
        rows = await self._pool.fetch(_TASK_FIRES, MAX_TASK_FIRES)
        return [TaskFire(r["task"], r["occurrence_ms"], r["fired_at_ms"]) for r in rows]

    async def record_task_fire(self, task: str, occurrence_ms: int) -> None:
        await self._pool.execute(_RECORD_TASK_FIRE, task, occurrence_ms, self._clock.now_ms())


def _bulk_args(flt: BulkFilter) -> tuple[Any, ...]:
    return (flt.state, flt.queue, flt.name, flt.tenant_id)


def _duplicate(job_id: str) -> JobDuplicateError:
    return JobDuplicateError(
        f"a live job holds the idempotency key of {job_id!r}; let it finish or cancel it",
        meta={"id": job_id},
    )
