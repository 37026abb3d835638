"""The result waits of an announcing driver with an announcer: every call delegated, and a
watch that finds its row due (waiting to start) publishes the row's queue to other processes,
unthrottled (this process's workers are told by the driver itself).

Why: on Postgres the watch marks the row (``result_watch.sql``), and a claim that met the row
during the mark skipped it (SKIP LOCKED) and went back to its poll. The statement notifies
``x_jobs_wake`` for LISTEN workers and the driver tells this process's workers; a fleet woken
through Redis hears it here. Unthrottled: the enqueue a moment before has usually used the
queue's wake slot already, and a throttled announce would be dropped exactly when it matters
(``POST /v1/jobs/{name}?wait=``, ``handle.result()`` straight after an enqueue). One publish
per watch of a due row: a wait watches once, and again only when rung.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager

from ujobs.clock import Clock
from ujobs.drivers.operator_surface import JobRow
from ujobs.drivers.results import JobResults, SettleTicket
from ujobs.wake.announce_introspect import Announce

WAITING_STATES = frozenset({"ready", "delayed", "suspended"})


class AnnouncingResults(JobResults):
    """``inner`` with a due row's watch announced."""

    def __init__(self, inner: JobResults, announce: Announce, clock: Clock) -> None:
        self.inner = inner
        self._announce = announce
        self._clock = clock

    async def read(self, job_id: str) -> JobRow | None:
        return await self.inner.read(job_id)

    async def watch(self, job_id: str) -> JobRow | None:
        row = await self.inner.watch(job_id)
        if (
            row is not None
            and row.state in WAITING_STATES
            and row.run_at_ms <= self._clock.now_ms()
        ):
            self._announce(row.queue, throttled=False)
        return row

    def listen(self, job_id: str) -> AbstractAsyncContextManager[SettleTicket]:
        return self.inner.listen(job_id)


__all__ = ["AnnouncingResults"]
