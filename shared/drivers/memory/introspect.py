"""The operator surface of the memory driver: every member of ``JobIntrospection``.

It reads and moves the same ``MemoryState`` the core operations use, so what an operator sees
is exactly what a worker claims. The row moves live in ``bulk`` and the counter history
in ``counters``; this class is the one door the CLI, the api and the dashboard use.
"""

from __future__ import annotations

import builtins
from typing import Any

from ujobs.clock import Clock
from ujobs.drivers.base import (
    CLAIMABLE_STATES,
    LIVE_STATES,
    MAX_TASK_FIRES,
    PROGRESS_INTERVAL_MS,
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
from ujobs.drivers.memory.bulk import (
    promote_many,
    promote_one,
    remove_many,
    requeue_many,
    requeue_one,
)
from ujobs.drivers.memory.counters import counter_totals, counters, rollup_counters
from ujobs.drivers.memory.state import MemoryRow, MemoryState, json_copy
from ujobs.drivers.memory.workers import MemoryWorkerRegistry
from ujobs.errors import InvariantError, JobNotRemovableError

JSONValue = Any


def _name(kind: str, value: str) -> str:
    if not isinstance(value, str) or not value:
        raise InvariantError(f"a {kind} name must be a non-empty string", meta={kind: value})
    return value


def _selected(row: MemoryRow, flt: JobFilter) -> bool:
    """``created_from_ms`` and ``created_to_ms`` inclusive; ``id_prefix`` ignores case."""
    return (
        (flt.queue is None or row.queue == flt.queue)
        and (flt.name is None or row.name == flt.name)
        and (flt.state is None or row.state == flt.state)
        and (flt.tenant_id is None or row.tenant_id == flt.tenant_id)
        and (flt.id_prefix is None or row.id.startswith(flt.id_prefix.lower()))
        and (flt.created_from_ms is None or row.created_at_ms >= flt.created_from_ms)
        and (flt.created_to_ms is None or row.created_at_ms <= flt.created_to_ms)
    )


class MemoryIntrospection:
    """``JobIntrospection`` over the memory driver's tables."""

    def __init__(self, state: MemoryState, clock: Clock, workers: MemoryWorkerRegistry) -> None:
        self._state = state
        self._clock = clock
        self._workers = workers

    # -- reading ------------------------------------------------------------------------
    async def list(self, flt: JobFilter) -> JobPage:
        limit, after, before = validate_job_filter(flt)
        rows = [r for r in self._state.rows.values() if _selected(r, flt)]
        if before is not None:
            # The rows nearest the cursor on its newer side, still shown newest first.
            newer = sorted(
                (r for r in rows if r.newest_first() > before), key=MemoryRow.newest_first
            )
            page = list(reversed(newer[:limit]))
        else:
            rows.sort(key=MemoryRow.newest_first, reverse=True)
            if after is not None:
                rows = [r for r in rows if r.newest_first() < after]
            page = rows[:limit]
        return JobPage(rows=[r.view() for r in page], limit=limit)

    async def get(self, job_id: str) -> JobRow | None:
        row = self._state.rows.get(job_id)
        return row.view() if row is not None else None

    async def attempt_errors(self, job_id: str) -> builtins.list[AttemptError]:
        row = self._state.rows.get(job_id)
        return list(row.attempt_errors) if row is not None else []

    # -- one row ------------------------------------------------------------------------
    async def remove(self, job_id: str) -> bool:
        row = self._state.rows.get(job_id)
        if row is None:
            return False
        if row.state == "running":
            raise JobNotRemovableError(
                f"job {job_id} is running; cancel it first (`ujobs jobs cancel {job_id}`)",
                meta={"id": job_id},
            )
        self._state.delete(row)
        return True

    async def requeue(self, job_id: str, *, from_step: str | None = None) -> JobRow:
        return requeue_one(self._state, job_id, self._clock.now_ms(), from_step).view()

    async def cancel(
        self, job_id: str, reason: str | None = None, *, detach_children: bool = False
    ) -> JobRow | None:
        row = self._state.rows.get(job_id)
        if row is None or row.state not in LIVE_STATES:
            return None
        now = self._clock.now_ms()
        self._end(row, f"cancelled: {reason}" if reason else "cancelled", now)
        if not detach_children:
            for child in self._state.descendants(job_id):
                if child.state in LIVE_STATES:
                    self._end(child, f"cancelled: parent {job_id} cancelled", now)
        return row.view()

    def _end(self, row: MemoryRow, error: str, now: int) -> None:
        if row.state == "running":
            row.cancelled_claim = row.claim
        row.last_error = error
        self._state.finish(row, "cancelled", now)

    async def promote(self, job_id: str) -> JobRow:
        return promote_one(self._state, job_id, self._clock.now_ms()).view()

    # -- many rows ----------------------------------------------------------------------
    async def requeue_many(self, flt: BulkFilter) -> BulkResult:
        return requeue_many(self._state, flt, self._clock.now_ms())

    async def remove_many(self, flt: BulkFilter) -> BulkResult:
        return remove_many(self._state, flt)

    async def promote_many(self, flt: BulkFilter) -> BulkResult:
        return promote_many(self._state, flt, self._clock.now_ms())

    # -- pauses -------------------------------------------------------------------------
    async def pause_queue(self, queue: str) -> None:
        self._state.paused_queues.add(_name("queue", queue))

    async def resume_queue(self, queue: str) -> None:
        self._state.paused_queues.discard(queue)

    async def paused_queues(self) -> builtins.list[str]:
        return sorted(self._state.paused_queues)

    async def queue_tenants(self, queue: str, now_ms: int, *, cap: int, top: int) -> QueueTenants:
        due = sorted(
            (
                r
                for r in self._state.rows.values()
                if r.queue == queue and r.state in CLAIMABLE_STATES and r.run_at_ms <= now_ms
            ),
            key=lambda r: (r.priority, r.run_at_ms, r.seq),
        )
        read = due[:cap]  # the first `cap` in hand-out order: priority, then oldest
        groups: dict[str | None, list[tuple[int, int]]] = {}
        for row in read:
            groups.setdefault(row.tenant_id, []).append((row.run_at_ms, row.seq))
        # A group's rows span bands, so its oldest is its least (run_at, seq), not its first.
        ranked = sorted(groups.items(), key=lambda g: (-len(g[1]), min(g[1])))
        return QueueTenants(
            tenants=tuple(TenantBacklog(t, len(due), min(due)[0]) for t, due in ranked[:top]),
            capped=len(due) > cap,
        )

    async def pause_task(self, task: str) -> None:
        self._state.paused_tasks.add(_name("task", task))

    async def resume_task(self, task: str) -> None:
        self._state.paused_tasks.discard(task)

    async def paused_tasks(self) -> builtins.list[str]:
        return sorted(self._state.paused_tasks)

    # -- workers, counters --------------------------------------------------------------
    async def workers(self) -> builtins.list[WorkerRow]:
        return self._workers.live()

    async def counters(self, job: str, since_ms: int) -> builtins.list[CounterBucket]:
        return counters(self._state, job, since_ms)

    async def counter_totals(self, since_ms: int) -> builtins.list[CounterTotals]:
        return counter_totals(self._state, since_ms)

    async def rollup_counters(self) -> int:
        return rollup_counters(self._state, self._clock.now_ms())

    # -- progress, task fires -----------------------------------------------------------
    async def record_progress(
        self, job_id: str, ref: ClaimRef, progress: JSONValue, *, force: bool = False
    ) -> bool:
        row = self._state.owned(job_id, ref)
        if row is None:
            return False
        now = self._clock.now_ms()
        if (
            not force
            and row.progress_at_ms is not None
            and now - row.progress_at_ms < PROGRESS_INTERVAL_MS
        ):
            row.pending_progress = (json_copy(progress),)  # lands with the claim's settle
            return True
        row.progress = json_copy(progress)
        row.pending_progress = None
        row.progress_at_ms = now
        row.updated_at_ms = now
        return True

    async def task_fires(self) -> builtins.list[TaskFire]:
        fires = sorted(self._state.task_fires.values(), key=lambda f: f.task)
        return fires[:MAX_TASK_FIRES]

    async def record_task_fire(self, task: str, occurrence_ms: int) -> None:
        self._state.task_fires[_name("task", task)] = TaskFire(
            task=task, occurrence_ms=occurrence_ms, fired_at_ms=self._clock.now_ms()
        )
