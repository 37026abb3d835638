"""The worker's row in the registry (``x_job_workers``): who it is, what it holds, whether it
drains.

Beaten at start, every heartbeat interval after (by the heartbeat timer), and at once when the
worker stops claiming — the ``draining`` announce a scaler reads to subtract this worker's runs
from the queue depth (the row keeps ``draining_at`` from that first announce). The row expires
one visibility timeout after its last beat, so a SIGKILLed worker vanishes on its own; a worker
that stops removes it. ``slots`` is the tighter of the process cap and the pool sum. A driver
with no registry (``driver.workers is None``) makes every call here a no-op.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Callable, Sequence

from ujobs.clock import Clock
from ujobs.drivers.base import WorkerInfo, WorkerRegistry

log = logging.getLogger("ujobs.worker")


class RegistryBeat:
    def __init__(
        self,
        *,
        registry: WorkerRegistry | None,
        worker_id: str,
        queues: Sequence[str],
        slots: int,
        in_flight: Callable[[], list[str]],
        ttl_ms: int,
        interval_ms: int,
        clock: Clock,
    ) -> None:
        self.registry = registry
        self.clock = clock
        self.info = WorkerInfo(
            id=worker_id,
            host=socket.gethostname(),
            pid=os.getpid(),
            started_at_ms=clock.now_ms(),
            queues=tuple(queues),
            slots=slots,
        )
        self._in_flight = in_flight
        self.ttl_ms = ttl_ms
        self.interval_ms = interval_ms
        self.draining = False
        self.next_at: int | None = None
        self.beats = 0
        self._inflight: asyncio.Task[None] | None = None

    def due_at(self, _now: int) -> int | None:
        """When the next beat is due (None: no registry, or not started)."""
        return None if self.registry is None else self.next_at

    async def beat(self) -> None:
        """Upsert the row now (a failure is logged; the next interval tries again)."""
        if self.registry is None:
            return
        now = self.clock.now_ms()
        self.next_at = now + self.interval_ms
        try:
            await self.registry.beat(
                self.info, self._in_flight(), self.ttl_ms, draining=self.draining
            )
            self.beats += 1
        except Exception as exc:
            log.warning(
                "jobs.worker.beat-failed",
                extra={"worker_id": self.info.id, "error": f"{type(exc).__name__}: {exc}"},
            )

    def beat_soon(self) -> asyncio.Task[None] | None:
        """A beat as a task, unless one is already on the wire (the timer's entry point)."""
        if self.registry is None:
            return None
        if self._inflight is not None and not self._inflight.done():
            return None
        self.next_at = self.clock.now_ms() + self.interval_ms
        self._inflight = asyncio.ensure_future(self.beat())
        return self._inflight

    def announce_draining(self) -> asyncio.Task[None] | None:
        """Say ``draining`` at once (a task: the accept phase returns immediately)."""
        self.draining = True
        if self.registry is None:
            return None
        self._inflight = asyncio.ensure_future(self.beat())
        return self._inflight

    async def remove(self) -> None:
        if self.registry is None:
            return
        self.next_at = None
        if self._inflight is not None and not self._inflight.done():
            await asyncio.wait({self._inflight})  # else a late beat would re-create the row
        try:
            await self.registry.remove(self.info.id)
        except Exception as exc:
            log.warning(
                "jobs.worker.remove-failed",
                extra={"worker_id": self.info.id, "error": f"{type(exc).__name__}: {exc}"},
            )
