"""``pooled(pool)``: one connection of an asyncpg pool for one call, with the database being
away handled the way the driver's held connections handle it (``held_connections``).

Two things ``pool.fetch()`` does not do:

* A connection whose statement saw a connection-class failure (``unreachable.connection_broken``)
  is TERMINATED before it goes back, so the pool never hands it out again. This matters most
  for the connection that READ the server's FATAL while idle (a restart, a
  ``pg_terminate_backend``) but has not read the close yet: asyncpg fails its next statement
  with ``InternalClientError: cannot switch to state 12; another operation (2) is in
  progress`` (state 2 is "consuming an error", not a second statement), and a pool built by
  ``postgres_pool()`` (no reset statement on release) would otherwise take it back as usable.
* A failure because the database could not be reached (``unreachable.store_unreachable``: the
  connect refused or reset, the server shutting down or starting up, the session ended) leaves
  as ``X_DRIVER_UNREACHABLE`` (``unreachable.unreachable``), which the api answers 503 with
  ``Retry-After``. Every other error (a constraint, a syntax error) leaves unchanged.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import asyncpg

from shared.drivers.postgres.unreachable import connection_broken, store_unreachable, unreachable

if TYPE_CHECKING:
    Pool = asyncpg.Pool[Any]
    Conn = asyncpg.pool.PoolConnectionProxy[Any]


@contextlib.asynccontextmanager
async def pooled(pool: Pool) -> AsyncIterator[Conn]:
    """``async with pooled(pool) as conn:`` one statement or a few, on a connection of its own."""
    try:
        async with pool.acquire() as conn:
            try:
                yield conn
            except BaseException as exc:
                if connection_broken(exc):
                    with contextlib.suppress(asyncpg.InterfaceError):  # asyncpg detached it
                        conn.terminate()
                raise
    except Exception as exc:
        if store_unreachable(exc):
            raise unreachable(exc) from exc
        raise


__all__ = ["pooled"]
