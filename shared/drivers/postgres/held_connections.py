"""A few pooled connections the driver keeps checked out for its hot statements.

Every ``pool.fetch()`` checks a connection out of asyncpg's pool and back in, which costs about as
much Python time as the round trip of a small statement (bench/RESULTS.md). Enqueue, claim and the
settles run through ``HeldConnections`` instead: up to ``max_held`` connections taken from the
caller's pool once and reused, checked out and in with a list pop/push. Past ``max_held`` concurrent
statements it simply goes through the pool. A connection whose statement raised a plain database
error is reused; one whose statement was cancelled goes back to the pool; and one that saw a
connection-level error (``unreachable.connection_broken``: a FATAL, a closed socket, asyncpg's
``cannot switch to state``) is TERMINATED — never parked, never handed to the pool to reuse — and so
is every idle held connection with it, because what ends one session (a restart, a crash) ends them
all, and an idle one may have read its FATAL without having read the close yet: reused, it fails its
next statement. ``close()`` returns every held connection to the pool.

A connection-class failure leaves ``run()`` as ``X_DRIVER_UNREACHABLE``
(``unreachable.unreachable``): this is the one gateway of the driver's hot
statements, so every one of them (enqueue, claim, the settles, the heartbeat, the steps)
translates the same way.

A connection idle for ``IDLE_RELEASE_S`` goes back to the pool by itself, so a driver nobody
closed never keeps ``pool.close()`` waiting for long, and an idle process holds nothing.

Every connection taken from the pool runs the driver's statements without JIT
(``plan_settings``): free on a ``postgres_pool()``; on a pool whose sessions start with JIT on,
one ``set jit = off`` per connection taken (a held one is handed back with ``reset jit``; one
taken past the cap for a single statement is left to the pool's own reset).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import asyncpg

from ujobs.drivers.postgres.plan_settings import SessionPlanSettings
from ujobs.drivers.postgres.unreachable import connection_broken, store_unreachable, unreachable

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
        self._plans = SessionPlanSettings()

    async def run(self, call: Callable[[Conn], Awaitable[T]]) -> T:
        """``await call(connection)`` on a held connection (or a pooled one past the cap); a
        connection-class failure raises ``X_DRIVER_UNREACHABLE``."""
        try:
            return await self._run(call)
        except Exception as exc:
            if store_unreachable(exc):
                raise unreachable(exc) from exc
            raise

    async def _run(self, call: Callable[[Conn], Awaitable[T]]) -> T:
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
            try:
                await self._plans.settle(conn)
            except BaseException:
                await self._give_back(conn)
                raise
        else:
            async with self._pool.acquire() as pooled:
                try:
                    # No reset after: the pool's own (asyncpg's default RESET ALL) undoes it.
                    await self._plans.settle(pooled)
                    return await call(pooled)
                except BaseException as exc:
                    if connection_broken(exc):
                        with contextlib.suppress(asyncpg.InterfaceError):
                            pooled.terminate()  # the pool must not hand it out again
                    raise
        try:
            result = await call(conn)
        except asyncpg.PostgresError as exc:
            if connection_broken(exc) or ended(conn):
                await self._drop(conn)
            else:
                self._park(conn)  # the statement failed; the connection is fine
            raise
        except BaseException as exc:
            if connection_broken(exc):
                await self._drop(conn)
            else:
                await self._give_back(conn)  # a cancellation: the pool settles the session
            raise
        if self._closed:
            await self._hand_back(conn)
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
            task = asyncio.get_running_loop().create_task(self._hand_back(conn))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        if self._idle:
            self._reaper = asyncio.get_running_loop().call_later(IDLE_RELEASE_S, self._reap)

    async def _give_back(self, conn: Conn) -> None:
        self._held -= 1
        await self._pool.release(conn)

    async def _hand_back(self, conn: Conn) -> None:
        """Give back an idle connection in the state the pool lent it (``plan_settings``)."""
        try:
            await self._plans.restore(conn)
        except Exception:
            # Its session is in doubt (a broken link, asyncpg's "another operation is in
            # progress"): terminated, the pool opens a new one. Given back whatever happened, or
            # the pool's close() would wait on it forever.
            with contextlib.suppress(Exception):
                conn.terminate()
        except BaseException:
            with contextlib.suppress(Exception):
                conn.terminate()
            await self._give_back(conn)
            raise
        await self._give_back(conn)

    async def _drop(self, conn: Conn) -> None:
        """Terminate ``conn`` and every idle held connection: the pool opens new ones."""
        doomed = [conn, *(idle for idle, _ in self._idle)]
        self._idle.clear()
        for each in doomed:
            with contextlib.suppress(asyncpg.InterfaceError):  # asyncpg already detached it
                each.terminate()
            await self._give_back(each)  # releases the holder; a no-op once terminated

    async def close(self) -> None:
        """Return every idle held connection to the pool (busy ones follow when they finish)."""
        self._closed = True
        if self._reaper is not None:
            self._reaper.cancel()
            self._reaper = None
        while self._idle:
            await self._hand_back(self._idle.pop()[0])
        if self._tasks:
            await asyncio.wait(list(self._tasks))
