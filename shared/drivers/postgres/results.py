"""The Postgres driver's result waits (``ujobs.drivers.results``): the row read with its
result, the ``result_waited`` mark (``sql/queries/result_watch.sql``), and ONE ``LISTEN
x_jobs_settled`` session per process, on a connection taken from the pool while any wait is
open and handed back when the last one ends.

The session is a pooled connection held for the whole time it listens (never handed to another
statement meanwhile), so the waits cost one of the pool's connections, not one each. A session
that drops rings every open wait; the next wait dials again.

A watch that marks a DUE row announces its queue (``result_watch.sql`` notifies
``x_jobs_wake``; this process's workers are told here): the mark held the row's lock for a
moment, and a claim that met it then skipped the row and went back to its poll. Without this a
job enqueued and waited for at once could start an idle poll late (seen: 1-2 s).
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import AbstractAsyncContextManager
from typing import Any

import asyncpg

from ujobs.clock import SYSTEM_CLOCK, Clock
from ujobs.drivers.operator_surface import JobRow
from ujobs.drivers.postgres.rows import job_row
from ujobs.drivers.postgres.sql import query
from ujobs.drivers.results import SettleTicket, SettleWaits, registered
from ujobs.wake.local import signal_enqueued

log = logging.getLogger("ujobs.results")

SETTLED_CHANNEL = "x_jobs_settled"
_GET = query("get_job")
_WATCH = query("result_watch")

# Which named statements each JobResults operation runs (tests/integration prove the map).
OPERATION_QUERIES: dict[str, tuple[str, ...]] = {
    "read": ("get_job",),
    "watch": ("result_watch",),
}


class PostgresResults:
    def __init__(self, pool: asyncpg.Pool[Any], clock: Clock = SYSTEM_CLOCK) -> None:
        self._pool = pool
        self._clock = clock
        self._waits = SettleWaits()
        self._conn: Any = None
        self._dead: list[Any] = []
        self._lock = asyncio.Lock()

    async def read(self, job_id: str) -> JobRow | None:
        row = await self._pool.fetchrow(_GET, job_id)
        return None if row is None else job_row(row)

    async def watch(self, job_id: str) -> JobRow | None:
        row = await self._pool.fetchrow(_WATCH, job_id, self._clock.now_ms())
        if row is None:
            return None
        if row["announced"]:
            signal_enqueued(row["queue"])  # the claim the mark made skip it: pass again
        return job_row(row)

    def listen(self, job_id: str) -> AbstractAsyncContextManager[SettleTicket]:
        return registered(self._waits, job_id, session=self._listening, close=self._hand_back)

    def listening(self) -> bool:
        """Whether this process holds its LISTEN session now."""
        return self._conn is not None

    async def _listening(self) -> None:
        """Dial the session unless it is up (idempotent; every wait calls it before sleeping)."""
        if self.listening():
            return
        async with self._lock:
            if self.listening():  # dialled by another wait while this one queued on the lock
                return
            await self._release_dead()
            conn = await self._pool.acquire()
            try:
                await conn.add_listener(SETTLED_CHANNEL, self._heard)
                conn.add_termination_listener(self._dropped)
            except BaseException:
                await self._pool.release(conn)
                raise
            self._conn = conn

    def _heard(self, _conn: Any, _pid: int, _channel: str, payload: object) -> None:
        self._waits.heard(str(payload))

    def _dropped(self, _conn: Any) -> None:
        if self._conn is not None:
            self._dead.append(self._conn)  # handed back to the pool by the next dial
        self._conn = None
        log.info("ujobs.results.session-lost", extra={"waits": len(self._waits)})
        self._waits.ring_all()

    async def _release_dead(self) -> None:
        """Hand the pool back the connections whose session dropped (it replaces them)."""
        dead, self._dead = self._dead, []
        for conn in dead:
            try:
                await self._pool.release(conn)
            except Exception as exc:
                log.debug("ujobs.results.release-failed", extra={"error": repr(exc)})

    async def _hand_back(self) -> None:
        async with self._lock:
            await self._release_dead()
            conn, self._conn = self._conn, None
            if conn is None or len(self._waits):
                self._conn = conn if len(self._waits) else None
                return
            try:
                conn.remove_termination_listener(self._dropped)
                await conn.remove_listener(SETTLED_CHANNEL, self._heard)
                await self._pool.release(conn)
            except Exception as exc:
                log.debug("ujobs.results.release-failed", extra={"error": repr(exc)})


__all__ = ["SETTLED_CHANNEL", "PostgresResults"]
