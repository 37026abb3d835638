"""``DelegatingDriver`` and ``DelegatingIntrospection``: a driver (and its operator surface)
that hands every call to an ``inner`` one, written once, so a wrapper overrides only what it
changes (``ujobs.wake.announce`` overrides the calls that announce).

The optional capabilities a caller asks about (``stores_in``; ``ujobs.drivers.base``) are
passed through too, so a wrapped driver answers them as the driver it wraps; a wrapper that
adds one (``announce``) answers that one itself. The type checker proves each class still
implements its Protocol whole.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable

from ujobs.drivers.base import (
    AttemptError,
    BackfillLedger,
    BulkFilter,
    BulkResult,
    ClaimedJob,
    ClaimOptions,
    ClaimRef,
    CounterBucket,
    CounterTotals,
    DriverStats,
    Enqueued,
    EnqueueRequest,
    HeartbeatResult,
    JobDriver,
    JobFilter,
    JobIntrospection,
    JobPage,
    JobRow,
    JSONValue,
    LeaseStore,
    NackOptions,
    QueueTenants,
    StepRecord,
    StoreWatch,
    TaskFire,
    WorkerRegistry,
    WorkerRow,
    stores_in,
)
from ujobs.drivers.children import JobChildren, children_of
from ujobs.drivers.fairness import TenantWeights, weights_of
from ujobs.drivers.results import JobResults, results_of

__all__ = ["DelegatingDriver", "DelegatingIntrospection"]


class DelegatingDriver(JobDriver):
    """Every ``JobDriver`` member answered by ``inner``."""

    def __init__(self, inner: JobDriver) -> None:
        self.inner = inner
        self.name = inner.name
        self.clock = inner.clock

    async def enqueue(self, request: EnqueueRequest) -> Enqueued:
        return await self.inner.enqueue(request)

    async def enqueue_many(self, requests: Iterable[EnqueueRequest]) -> list[Enqueued]:
        return await self.inner.enqueue_many(requests)

    async def claim(self, options: ClaimOptions) -> list[ClaimedJob]:
        return await self.inner.claim(options)

    async def ack(
        self,
        job_id: str,
        ref: ClaimRef,
        *,
        duration_ms: int | None = None,
        result: str | None = None,
        slot: str | None = None,
    ) -> bool:
        return await self.inner.ack(job_id, ref, duration_ms=duration_ms, result=result, slot=slot)

    async def nack(
        self, job_id: str, ref: ClaimRef, options: NackOptions, *, slot: str | None = None
    ) -> bool:
        return await self.inner.nack(job_id, ref, options, slot=slot)

    async def heartbeat(self, job_id: str, ref: ClaimRef, visibility_ms: int) -> HeartbeatResult:
        return await self.inner.heartbeat(job_id, ref, visibility_ms)

    async def start_ahead(self, job_id: str, ref: ClaimRef) -> bool:
        return await self.inner.start_ahead(job_id, ref)

    async def load_steps(self, run_id: str, *, tenant_id: str | None) -> list[StepRecord]:
        return await self.inner.load_steps(run_id, tenant_id=tenant_id)

    async def save_step(
        self,
        job_id: str,
        ref: ClaimRef,
        run_id: str,
        name: str,
        output: JSONValue,
        *,
        started_at_ms: int,
    ) -> bool:
        return await self.inner.save_step(
            job_id, ref, run_id, name, output, started_at_ms=started_at_ms
        )

    async def stats(self) -> DriverStats:
        return await self.inner.stats()

    async def close(self) -> None:
        await self.inner.close()

    @property
    def introspect(self) -> JobIntrospection | None:
        return self.inner.introspect

    @property
    def leases(self) -> LeaseStore | None:
        return self.inner.leases

    @property
    def workers(self) -> WorkerRegistry | None:
        return self.inner.workers

    @property
    def backfills(self) -> BackfillLedger | None:
        return self.inner.backfills

    @property
    def store_watch(self) -> StoreWatch | None:
        return self.inner.store_watch

    @property
    def results(self) -> JobResults | None:
        return results_of(self.inner)

    @property
    def children(self) -> JobChildren | None:
        return children_of(self.inner)

    @property
    def weights(self) -> TenantWeights | None:
        return weights_of(self.inner)

    def stores_in(self, executor: object) -> bool:
        return stores_in(self.inner, executor)


class DelegatingIntrospection(JobIntrospection):
    """Every ``JobIntrospection`` member answered by ``inner``."""

    def __init__(self, inner: JobIntrospection) -> None:
        self.inner = inner

    async def list(self, flt: JobFilter) -> JobPage:
        return await self.inner.list(flt)

    async def get(self, job_id: str) -> JobRow | None:
        return await self.inner.get(job_id)

    async def attempt_errors(self, job_id: str) -> builtins.list[AttemptError]:
        return await self.inner.attempt_errors(job_id)

    async def requeue(self, job_id: str, *, from_step: str | None = None) -> JobRow:
        return await self.inner.requeue(job_id, from_step=from_step)

    async def promote(self, job_id: str) -> JobRow:
        return await self.inner.promote(job_id)

    async def remove(self, job_id: str) -> bool:
        return await self.inner.remove(job_id)

    async def cancel(
        self, job_id: str, reason: str | None = None, *, detach_children: bool = False
    ) -> JobRow | None:
        return await self.inner.cancel(job_id, reason, detach_children=detach_children)

    async def requeue_many(self, flt: BulkFilter) -> BulkResult:
        return await self.inner.requeue_many(flt)

    async def promote_many(self, flt: BulkFilter) -> BulkResult:
        return await self.inner.promote_many(flt)

    async def remove_many(self, flt: BulkFilter) -> BulkResult:
        return await self.inner.remove_many(flt)

    async def pause_queue(self, queue: str) -> None:
        await self.inner.pause_queue(queue)

    async def resume_queue(self, queue: str) -> None:
        await self.inner.resume_queue(queue)

    async def paused_queues(self) -> builtins.list[str]:
        return await self.inner.paused_queues()

    async def queue_tenants(self, queue: str, now_ms: int, *, cap: int, top: int) -> QueueTenants:
        return await self.inner.queue_tenants(queue, now_ms, cap=cap, top=top)

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
