"""The Postgres transport of the wake: ONE dedicated ``LISTEN`` connection per dial, probes sent
through the pool (``sql/queries/wake_probe.sql``).

The session is its own connection, never one borrowed from the pool: a pooled connection goes
back to the pool (and to other statements) the moment the call that borrowed it returns, and a
``LISTEN`` on it would be heard by whoever holds it next. The probe goes the other way on
purpose — through the pool, as an enqueue's ``pg_notify`` does — so a proxy that swallows
notifications (PgBouncer in transaction mode) shows up as a probe that never comes back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

import asyncpg

from ujobs.drivers.postgres.sql import query
from ujobs.wake.session import Deliver, WakeSession

_PROBE = query("wake_probe")
OPEN_TIMEOUT_S = 10.0
SESSION_APPLICATION_NAME = "ujobs-wake"
"""The session's ``application_name`` when dialled from a DSN: find it in pg_stat_activity."""

ConnectFactory = Callable[[], Awaitable["asyncpg.Connection[Any]"]]


class ProbeExecutor(Protocol):
    """What sends the probe: an asyncpg pool (or anything with its ``execute``)."""

    async def execute(self, query: str, *args: Any, timeout: float | None = None) -> str: ...


class PostgresSession:
    def __init__(self, connect: ConnectFactory, executor: ProbeExecutor) -> None:
        self._connect = connect
        self._executor = executor
        self._conn: asyncpg.Connection[Any] | None = None
        self._gone: asyncio.Event = asyncio.Event()

    async def open(self, channels: Sequence[str], deliver: Deliver) -> None:
        conn = await asyncio.wait_for(self._connect(), OPEN_TIMEOUT_S)
        self._conn = conn
        conn.add_termination_listener(lambda _conn: self._gone.set())

        def heard(_conn: Any, _pid: int, channel: str, payload: object) -> None:
            deliver(channel, str(payload))

        for channel in channels:
            await conn.add_listener(channel, heard)
        if conn.is_closed():
            self._gone.set()

    async def probe(self, channel: str, token: str) -> None:
        await self._executor.execute(_PROBE, channel, token)

    async def lost(self) -> None:
        await self._gone.wait()

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        self._gone.set()
        if conn is not None and not conn.is_closed():
            try:
                await asyncio.wait_for(conn.close(), OPEN_TIMEOUT_S)
            except Exception:
                conn.terminate()


def postgres_session_factory(
    connect: str | ConnectFactory, executor: asyncpg.Pool[Any] | ProbeExecutor
) -> Callable[[], WakeSession]:
    if isinstance(connect, str):
        dsn = connect

        async def dial() -> asyncpg.Connection[Any]:
            return await asyncpg.connect(
                dsn, server_settings={"application_name": SESSION_APPLICATION_NAME}
            )

        factory: ConnectFactory = dial
    else:
        factory = connect
    probe: ProbeExecutor = executor  # an asyncpg pool has this shape

    def make() -> WakeSession:
        return PostgresSession(factory, probe)

    return make
