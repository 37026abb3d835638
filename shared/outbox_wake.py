"""``postgres_outbox_wake()``: the relay's LISTEN on ``x_outbox_wake``.

A stage's ``pg_notify`` is delivered on COMMIT to every session listening, so a relay idling
at its ceiling starts its pass within a round trip of the caller's commit instead of within
2 s. This listener holds ONE dedicated session (``connect()``; never a pooled connection,
which a pool or a transaction-pooling proxy would take back, silently ending the LISTEN).

The wake is PROVEN before the relay trusts it: a probe sent through the pool (``executor``)
has to come back on the session (``jobs.wake.live``); until then ``live`` is False and the
relay keeps the 2 s idle ceiling. One that does not come back is logged
``jobs.wake.unverified`` once. A lost session is re-dialled with backoff; meanwhile the
relay's poll is the guarantee, and the re-dial wakes it once, for whatever was announced
while nobody was listening.

The wake helper's generic listener (``shared/wake.py``) was not on main when this was
written; this one is dedicated to the outbox channel and small on purpose.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg

from shared.ids import new_id
from shared.outbox_contract import OUTBOX_WAKE_CHANNEL, WakeCallback
from shared.outbox_store_pg import PgFetch
from shared.sql import query

log = logging.getLogger("ujobs.outbox")

_PROBE = query("outbox_wake_probe")
PROBE_TIMEOUT_MS = 2_000
REDIAL_MIN_MS = 500
REDIAL_MAX_MS = 30_000

Connect = Callable[[], Awaitable["asyncpg.Connection[Any]"]]


class PostgresOutboxWake:
    def __init__(
        self, *, connect: Connect, executor: PgFetch, probe_timeout_ms: int = PROBE_TIMEOUT_MS
    ) -> None:
        self._connect = connect
        self._executor = executor
        self._probe_timeout_ms = probe_timeout_ms
        self._subscribers: dict[int, WakeCallback] = {}
        self._next_key = 0
        self._conn: asyncpg.Connection[Any] | None = None
        self._live = False
        self._probe: str | None = None
        self._probed: asyncio.Event | None = None
        self._warned_unverified = False
        self._redial: asyncio.Task[None] | None = None
        self._stopped = False

    @property
    def live(self) -> bool:
        return self._live

    def subscribe(self, callback: WakeCallback) -> Callable[[], None]:
        key = self._next_key
        self._next_key += 1
        self._subscribers[key] = callback

        def unsubscribe() -> None:
            self._subscribers.pop(key, None)

        return unsubscribe

    def _wake(self, payload: str = "") -> None:
        for callback in list(self._subscribers.values()):
            callback(payload)

    # -- the session ------------------------------------------------------------------------
    async def start(self) -> None:
        """Dial and prove the session; never raises (a failure re-dials in the background)."""
        self._stopped = False
        if self._conn is None and self._redial is None and not await self._dial():
            self._schedule_redial()

    async def _dial(self) -> bool:
        try:
            conn = await self._connect()
            await conn.add_listener(OUTBOX_WAKE_CHANNEL, self._on_notify)
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            log.warning("jobs.outbox.wake-unavailable", extra={"error": repr(exc)})
            return False
        if self._stopped:
            await conn.close()
            return True
        conn.add_termination_listener(self._on_lost)
        self._conn = conn
        await self._prove()
        return True

    async def _prove(self) -> None:
        self._probe = f"probe:{new_id()}"
        self._probed = asyncio.Event()
        try:
            await self._executor.fetch(_PROBE, self._probe)
            await asyncio.wait_for(self._probed.wait(), self._probe_timeout_ms / 1000)
        except (TimeoutError, OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            if not self._warned_unverified:
                self._warned_unverified = True
                log.warning(
                    "jobs.wake.unverified",
                    extra={
                        "channel": OUTBOX_WAKE_CHANNEL,
                        "error": repr(exc),
                        "fix": "give the relay a direct or session-pooled DATABASE_URL; a "
                        "transaction-pooling proxy delivers no notifications",
                    },
                )

    def _on_notify(self, _conn: object, _pid: int, _channel: str, payload: object) -> None:
        if self._probe is not None and payload == self._probe:
            # Our probe came back on the session (late is fine too): the wake is proven.
            if self._probed is not None:
                self._probed.set()
            if not self._live:
                self._live = True
                log.info("jobs.wake.live", extra={"channel": OUTBOX_WAKE_CHANNEL})
            return
        self._wake(str(payload))

    def _on_lost(self, _conn: object) -> None:
        self._conn = None
        self._live = False
        if not self._stopped:
            log.warning("jobs.outbox.wake-lost", extra={"channel": OUTBOX_WAKE_CHANNEL})
            self._schedule_redial()

    def _schedule_redial(self) -> None:
        if self._redial is None and not self._stopped:
            self._redial = asyncio.ensure_future(self._redial_loop())

    async def _redial_loop(self) -> None:
        delay_ms = REDIAL_MIN_MS
        try:
            while not self._stopped:
                await asyncio.sleep(delay_ms / 1000)
                if await self._dial():
                    # Announcements made while nobody listened are lost: one pass finds them.
                    self._wake()
                    return
                delay_ms = min(delay_ms * 2, REDIAL_MAX_MS)
        finally:
            self._redial = None

    async def stop(self) -> None:
        """Close the session; safe to call twice."""
        self._stopped = True
        self._live = False
        redial = self._redial
        if redial is not None:
            redial.cancel()
            await asyncio.wait({redial})
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.remove_termination_listener(self._on_lost)
            try:
                await conn.close()
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
                conn.terminate()


def postgres_outbox_wake(
    *, connect: Connect, executor: PgFetch, probe_timeout_ms: int = PROBE_TIMEOUT_MS
) -> PostgresOutboxWake:
    """The relay's wake over LISTEN ``x_outbox_wake`` on a session of its own (``connect``,
    e.g. ``lambda: asyncpg.connect(dsn)``); the probe that proves it goes through
    ``executor`` (the pool). ``await wake.start()`` before the relay, ``stop()`` after it."""
    return PostgresOutboxWake(connect=connect, executor=executor, probe_timeout_ms=probe_timeout_ms)
