"""The worker registry in memory: the twin of ``x_job_workers``.

A worker upserts its row on every heartbeat; the row lives ``ttl_ms`` (one visibility timeout)
past its last beat, so a SIGKILLed worker disappears on its own. ``draining_at`` is stamped by
the FIRST beat that says ``draining`` and then kept: a scaler subtracts a draining worker's runs
from the depth for as long as the drain lasts, so the stamp must not move or vanish.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence

from ujobs.clock import Clock
from ujobs.drivers.base import MAX_WORKER_IN_FLIGHT, WorkerInfo, WorkerRow
from ujobs.errors import InvariantError


class MemoryWorkerRegistry:
    """``WorkerRegistry`` over a dict of worker id -> row."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._rows: dict[str, WorkerRow] = {}

    async def beat(
        self, info: WorkerInfo, in_flight: Sequence[str], ttl_ms: int, *, draining: bool = False
    ) -> None:
        if not info.id:
            raise InvariantError("a worker row needs an id")
        if isinstance(ttl_ms, bool) or ttl_ms < 1:
            raise InvariantError("a worker row TTL is 1 ms or more", meta={"ttl": ttl_ms})
        now = self._clock.now_ms()
        previous = self._rows.get(info.id)
        if previous is not None and previous.expires_at_ms <= now:
            previous = None  # the row had lapsed: this beat starts a new one
        draining_at = previous.draining_at_ms if previous is not None else None
        if draining and draining_at is None:
            draining_at = now
        self._rows[info.id] = WorkerRow(
            id=info.id,
            host=info.host,
            pid=info.pid,
            started_at_ms=info.started_at_ms,
            queues=tuple(info.queues),
            slots=info.slots,
            in_flight=tuple(in_flight[:MAX_WORKER_IN_FLIGHT]),
            last_heartbeat_ms=now,
            expires_at_ms=now + ttl_ms,
            draining_at_ms=draining_at,
        )

    async def remove(self, worker_id: str) -> None:
        self._rows.pop(worker_id, None)

    def live(self) -> builtins.list[WorkerRow]:
        """Every row not yet expired, oldest worker first (started_at, then id)."""
        now = self._clock.now_ms()
        for worker_id in [w for w, r in self._rows.items() if r.expires_at_ms <= now]:
            del self._rows[worker_id]
        return sorted(self._rows.values(), key=lambda r: (r.started_at_ms, r.id))
