"""``pooled(pool)``: one connection of an asyncpg pool for one call, with the database being
away leaving as ``X_DRIVER_UNREACHABLE``, the way the driver's held connections do it
(``held_connections``).

A failure because the database could not be reached (``unreachable.store_unreachable``: the
connect refused or reset, the server shutting down or starting up, the session ended) leaves
as ``X_DRIVER_UNREACHABLE`` (``unreachable.unreachable``), which the api answers 503 with
``Retry-After``. Every other error (a constraint, a syntax error) leaves unchanged.

That includes the connection that READ the server's FATAL while idle (a restart, a
``pg_terminate_backend``) and had not read the close yet: asyncpg fails its next statement
with ``InternalClientError: cannot switch to state 12; another operation (2) is in progress``
(state 2 is asyncpg consuming that error, not a second statement on the connection) and
closes the connection itself, so the pool opens a new one for the next call.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from ujobs.drivers.postgres.unreachable import store_unreachable, unreachable

if TYPE_CHECKING:
    import asyncpg

    Pool = asyncpg.Pool[Any]
    Conn = asyncpg.pool.PoolConnectionProxy[Any]


@contextlib.asynccontextmanager
async def pooled(pool: Pool) -> AsyncIterator[Conn]:
    """``async with pooled(pool) as conn:`` one statement or a few, on a connection of its own."""
    try:
        async with pool.acquire() as conn:
            yield conn
    except Exception as exc:
        if store_unreachable(exc):
            raise unreachable(exc) from exc
        raise


__all__ = ["pooled"]
