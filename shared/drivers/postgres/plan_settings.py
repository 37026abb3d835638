"""The session settings the driver's statements need to keep their plans as tables grow.

Postgres JIT-compiles a statement whose estimated cost passes ``jit_above_cost`` (100,000 by
default). The generic plan of the claim over a million-row ``x_jobs`` estimates past that, and
compiling it costs tens of milliseconds on every execution while the statement itself runs in
a few: a large backlog then drains an order of magnitude slower, exactly when it should not.
The driver's statements are short index walks that never gain from JIT, so its sessions run
with ``jit = off``:

- ``postgres_pool()`` starts every session that way (``DRIVER_SESSION_SETTINGS``, sent as
  asyncpg ``server_settings``: a client setting outranks the server's, the database's and the
  role's);
- on any other pool (one the user hands to ``postgres_driver``), ``SessionPlanSettings`` asks
  the first connection the driver takes whether its sessions already run without JIT; if not,
  it says so once (``ujobs.postgres.jit-on``: each connection the driver takes then costs a
  round trip more) and every connection the driver takes is switched off
  (``set jit = off``). A connection the driver holds is switched back (``reset jit``) before
  it goes back, so the user's own sessions keep their setting; one taken for a single
  statement past the held ones, or handed back because its statement was cancelled, is left
  to the pool's own reset (asyncpg's default runs ``RESET ALL``; a pool built with a reset
  that does not keeps ``jit = off`` on those sessions).

The other hot statements (the outbox relay's claim, the scheduler's fire, the webhook pace,
the purge) run on whatever executor their store was given, one statement at a time, where a
``set`` per statement would cost a round trip each. Their stores hold a ``JitCheck``: the
first statement's session is asked once, and a session with JIT on is named in one warning
line (``ujobs.postgres.jit-on``) with what to set. The services' pools are ``postgres_pool()``s
and never warn.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ujobs.drivers.postgres.executor import PgExecutor
from ujobs.drivers.postgres.sql import query

if TYPE_CHECKING:
    import asyncpg

    Conn = asyncpg.pool.PoolConnectionProxy[Any]

DRIVER_SESSION_SETTINGS: dict[str, str] = {"jit": "off"}
JIT_ON = "ujobs.postgres.jit-on"

log = logging.getLogger("ujobs.postgres")

_JIT = query("session_jit")
_JIT_OFF = query("session_jit_off")
_JIT_RESET = query("session_jit_reset")


class SessionPlanSettings:
    """Whether the sessions of one pool need ``jit = off`` set by the driver, learnt from the
    first connection it takes (a pool's sessions all start from the same settings)."""

    def __init__(self) -> None:
        self._needed: bool | None = None

    async def settle(self, conn: Conn) -> bool:
        """Make ``conn`` run without JIT; answers whether it had to (``restore`` then undoes)."""
        if self._needed is None:
            self._needed = await conn.fetchval(_JIT) != "off"
            if self._needed:
                _warn(
                    "the Postgres driver",
                    "the driver sets jit = off on each connection it takes from this pool, a "
                    "round trip more",
                )
        if self._needed:
            await conn.execute(_JIT_OFF)
        return self._needed

    async def restore(self, conn: Conn) -> None:
        """Undo ``settle`` on ``conn`` before it goes back to the caller's pool."""
        if self._needed:
            await conn.execute(_JIT_RESET)


class JitCheck:
    """Once per store: whether the sessions of the executor it was given start with JIT on,
    said in one warning line naming ``component`` and what to set."""

    def __init__(self, component: str) -> None:
        self._component = component
        self._asked = False

    async def once(self, executor: PgExecutor) -> bool:
        """Ask ``executor``'s session the first time only; answers whether this call warned."""
        if self._asked:
            return False
        self._asked = True
        rows = await executor.fetch(_JIT)
        if rows[0]["jit"] == "off":
            return False
        _warn(
            self._component,
            "over a large table Postgres JIT-compiles its statements on every execution, tens "
            "of milliseconds each",
        )
        return True


def _warn(component: str, cost: str) -> None:
    log.warning(
        JIT_ON,
        extra={
            "component": component,
            "hint": f"the sessions {component} runs on start with jit = on: {cost}; build the "
            "pool with postgres_pool(), or pass server_settings={'jit': 'off'} to "
            "asyncpg.create_pool",
        },
    )
