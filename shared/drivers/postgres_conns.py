"""A few pooled connections the driver keeps checked out for its hot statements.

Every ``pool.fetch()`` checks a connection out of asyncpg's pool and back in, which costs about
as much Python time as the round trip of a small statement (measured: 105 µs for ``select 1``
on a held connection, 160 µs through the pool). Enqueue, claim and the settles run through
``HeldConnections`` instead: up to ``max_held`` connections taken from the caller's pool once
and reused, checked out and in with a list pop/push. Past ``max_held`` concurrent statements
it simply goes through the pool. A connection whose statement raised anything but a database
error (a cancellation, a broken socket) goes back to the pool instead of being reused, and
``close()`` returns every held connection to the pool.

A connection idle for ``IDLE_RELEASE_S`` goes back to the pool by itself, so a driver nobody
closed never keeps ``pool.close()`` waiting for long, and an idle process holds nothing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import asyncpg

if TYPE_CHECKING:
    Pool = asyncpg.Pool[Any]
    Conn = asyncpg.pool.PoolConnectionProxy[Any]

T = TypeVar("T")

DEFAULT_MAX_HELD = 4
IDLE_RELEASE_S = 0.5


def ended(conn: Conn) -> bool:
    """The server ended ``conn``. When asyncpg notices that itself it hands the connection back
    to its pool and detaches our proxy, whose ``is_closed()`` then raises ``InterfaceError``:
    that is an ended connection too (``pool.release`` of a detached proxy does nothing)."""
    try:
        return conn.is_closed()
    except asyncpg.InterfaceError:
        return True


class HeldConnections:
    def __init__(self, pool: Pool, *, max_held: int = DEFAULT_MAX_HELD) -> None:
        self._pool = pool
        self._max_held = max_held
        self._idle: list[tuple[Conn, float]] = []
        self._held = 0
        self._closed = False
        self._reaper: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def run(self, call: Callable[[Conn], Awaitable[T]]) -> T:
        """``await call(connection)`` on a held connection (or a pooled one past the cap)."""
        while self._idle and ended(self._idle[-1][0]):
            # The server ended it (a restart, pg_terminate_backend): the pool replaces it.
            await self._give_back(self._idle.pop()[0])
        if self._idle:
            conn = self._idle.pop()[0]
        elif self._held < self._max_held and not self._closed:
            self._held += 1
            try:
                conn = await self._pool.acquire()
            except BaseException:
                self._held -= 1
                raise
        else:
            async with self._pool.acquire() as pooled:
                return await call(pooled)
        try:
            result = await call(conn)
        except asyncpg.PostgresError:
            if ended(conn):
                await self._give_back(conn)
            else:
                self._park(conn)  # the statement failed; the connection is fine
            raise
        except BaseException:
            await self._give_back(conn)
            raise
        if self._closed:
            await self._give_back(conn)
        else:
            self._park(conn)
        return result

    def _park(self, conn: Conn) -> None:
        self._idle.append((conn, time.monotonic()))
        if self._reaper is None:
            self._reaper = asyncio.get_running_loop().call_later(IDLE_RELEASE_S, self._reap)

    def _reap(self) -> None:
        """Hand back the connections idle for IDLE_RELEASE_S; look again while any is held."""
        self._reaper = None
        cutoff = time.monotonic() - IDLE_RELEASE_S
        # _idle is a stack: the oldest parked connections are at the bottom.
        stale = [conn for conn, parked in self._idle if parked <= cutoff]
        self._idle = [(conn, parked) for conn, parked in self._idle if parked > cutoff]
        for conn in stale:
            task = asyncio.get_running_loop().create_task(self._give_back(conn))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        if self._idle:
            self._reaper = asyncio.get_running_loop().call_later(IDLE_RELEASE_S, self._reap)

    async def _give_back(self, conn: Conn) -> None:
        self._held -= 1
        await self._pool.release(conn)

    async def close(self) -> None:
        """Return every idle held connection to the pool (busy ones follow when they finish)."""
        self._closed = True
        if self._reaper is not None:
            self._reaper.cancel()
            self._reaper = None
        while self._idle:
            await self._give_back(self._idle.pop()[0])
        if self._tasks:
            await asyncio.wait(list(self._tasks))
