"""``postgres_pool()``: an asyncpg pool built the way the driver runs fastest.

``postgres_driver()`` takes any asyncpg pool. By default asyncpg sends a reset statement
(``pg_advisory_unlock_all(); CLOSE ALL; UNLISTEN *; RESET ALL``) every time a connection goes
back to the pool: one extra round trip per driver operation. The driver leaves no session state
behind (no session advisory locks, cursors, LISTENs or SETs; its transactions are managed and
end before release), so the pool built here skips that statement. A transaction left open is
still rolled back by asyncpg before the connection is reused. Share this pool only with code
that also leaves no session state.

``generic_plans`` (default on) sets ``plan_cache_mode = force_generic_plan`` on its sessions.
Postgres otherwise re-plans the claim on every call (its ``LIMIT $n`` makes the cached
generic plan look costlier than it is), about a millisecond of planning per claim; the
driver's statements are written so their generic plans stay index-driven (sql/README.md), and
a drain costs the database less CPU per job (bench/RESULTS.md). The price: an operator
page filtered by a rare state walks the newest-first index instead of a custom plan's pick.

Every session also starts with ``jit = off`` (``plan_settings.DRIVER_SESSION_SETTINGS``):
over a big ``x_jobs`` a generic plan's estimated cost passes ``jit_above_cost`` and Postgres
would JIT-compile the claim on every execution, several times the cost of running it. An
explicit ``server_settings={"jit": ...}`` passed here wins.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import asyncpg

from ujobs.drivers.postgres.plan_settings import DRIVER_SESSION_SETTINGS

if TYPE_CHECKING:
    Pool = asyncpg.Pool[Any]


async def _keep_session(conn: asyncpg.Connection[Any]) -> None:
    """The release hook: nothing to undo (asyncpg already rolled back any open transaction)."""


async def postgres_pool(
    dsn: str,
    *,
    min_size: int = 2,
    max_size: int = 20,
    generic_plans: bool = True,
    **connect_kwargs: Any,
) -> Pool:
    settings: dict[str, str] = dict(connect_kwargs.pop("server_settings", None) or {})
    for name, value in DRIVER_SESSION_SETTINGS.items():
        settings.setdefault(name, value)
    if generic_plans:
        settings.setdefault("plan_cache_mode", "force_generic_plan")
    pool = await asyncpg.create_pool(
        dsn,
        min_size=min_size,
        max_size=max_size,
        reset=_keep_session,
        server_settings=settings,
        **connect_kwargs,
    )
    assert pool is not None
    return pool
