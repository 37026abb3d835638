"""The operator surface of an announcing driver: every call delegated, and the ones that make
rows due announce their queue (unthrottled — the spec never has them stay silent).

``requeue`` and ``promote`` answer the moved row, so its queue is known. ``requeue_many`` and
``promote_many`` answer counts only: they announce the filter's ``queue`` when one was given
and something moved; with no queue filter they name nothing (see ``shared.wake.announce``).
"""

from __future__ import annotations

import builtins
from typing import Protocol

from shared.drivers.base import (
    BulkFilter,
    BulkResult,
    ClaimRef,
    CounterBucket,
    CounterTotals,
    JobFilter,
    JobIntrospection,
    JobPage,
    JobRow,
    JSONValue,
    TaskFire,
    WorkerRow,
)


class Announce(Protocol):
    def __call__(self, queue: str, *, throttled: bool = True) -> None: ...


class AnnouncingIntrospection(JobIntrospection):
    """Subclasses the protocol so the type checker proves every member is still here."""

    def __init__(self, inner: JobIntrospection, announce: Announce) -> None:
        self.inner = inner
        self._announce = announce

    def _due(self, queue: str) -> None:
        self._announce(queue, throttled=False)

    # -- the calls that make rows due ---------------------------------------------------------

    async def requeue(self, job_id: str, *, from_step: str | None = None) -> JobRow:
        row = await self.inner.requeue(job_id, from_step=from_step)
        self._due(row.queue)
        return row

    async def promote(self, job_id: str) -> JobRow:
        row = await self.inner.promote(job_id)
        self._due(row.queue)
        return row

    async def requeue_many(self, flt: BulkFilter) -> BulkResult:
        result = await self.inner.requeue_many(flt)
        if result.affected and flt.queue is not None:
            self._due(flt.queue)
        return result

    async def promote_many(self, flt: BulkFilter) -> BulkResult:
        result = await self.inner.promote_many(flt)
        if result.affected and flt.queue is not None:
            self._due(flt.queue)
        return result

    async def resume_queue(self, queue: str) -> None:
        await self.inner.resume_queue(queue)
        self._due(queue)

    # -- delegated ----------------------------------------------------------------------------

    async def list(self, flt: JobFilter) -> JobPage:
        return await self.inner.list(flt)

    async def get(self, job_id: str) -> JobRow | None:
        return await self.inner.get(job_id)

    async def remove(self, job_id: str) -> bool:
        return await self.inner.remove(job_id)

    async def cancel(self, job_id: str, reason: str | None = None) -> JobRow | None:
        return await self.inner.cancel(job_id, reason)

    async def remove_many(self, flt: BulkFilter) -> BulkResult:
        return await self.inner.remove_many(flt)

    async def pause_queue(self, queue: str) -> None:
        await self.inner.pause_queue(queue)

    async def paused_queues(self) -> builtins.list[str]:
        return await self.inner.paused_queues()

    async def pause_task(self, task: str) -> None:
        await self.inner.pause_task(task)

    async def resume_task(self, task: str) -> None:
        await self.inner.resume_task(task)

    async def paused_tasks(self) -> builtins.list[str]:
        return await self.inner.paused_tasks()

    async def workers(self) -> builtins.list[WorkerRow]:
        return await self.inner.workers()

    async def counters(self, job: str, since_ms: int) -> builtins.list[CounterBucket]:
        return await self.inner.counters(job, since_ms)

    async def counter_totals(self, since_ms: int) -> builtins.list[CounterTotals]:
        return await self.inner.counter_totals(since_ms)

    async def rollup_counters(self) -> int:
        return await self.inner.rollup_counters()

    async def record_progress(
        self, job_id: str, ref: ClaimRef, progress: JSONValue, *, force: bool = False
    ) -> bool:
        return await self.inner.record_progress(job_id, ref, progress, force=force)

    async def task_fires(self) -> builtins.list[TaskFire]:
        return await self.inner.task_fires()

    async def record_task_fire(self, task: str, occurrence_ms: int) -> None:
        await self.inner.record_task_fire(task, occurrence_ms)
