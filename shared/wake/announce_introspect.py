"""The operator surface of an announcing driver: every call delegated, and the ones that make
rows due announce their queue (unthrottled — the spec never has them stay silent).

``requeue`` and ``promote`` answer the moved row, so its queue is known. ``requeue_many`` and
``promote_many`` answer counts only: they announce the filter's ``queue`` when one was given
and something moved; with no queue filter they name nothing (see ``ujobs.wake.announce``).
"""

from __future__ import annotations

from typing import Protocol

from ujobs.drivers.base import BulkFilter, BulkResult, JobIntrospection, JobRow
from ujobs.drivers.delegating import DelegatingIntrospection


class Announce(Protocol):
    def __call__(self, queue: str, *, throttled: bool = True) -> None: ...


class AnnouncingIntrospection(DelegatingIntrospection):
    """Everything delegated (``DelegatingIntrospection``); these five announce."""

    def __init__(self, inner: JobIntrospection, announce: Announce) -> None:
        super().__init__(inner)
        self._announce = announce

    def _due(self, queue: str) -> None:
        self._announce(queue, throttled=False)

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
