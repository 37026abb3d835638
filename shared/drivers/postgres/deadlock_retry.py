"""One more try for a statement Postgres chose as a deadlock victim.

A claim walking the claim index can hold, until it commits, the row lock of a row it looked
at and did not take (Postgres keeps the lock of a row that failed the re-check after locking
it); an ack of that very row waits for it meanwhile. Rarely the two end in a cycle and Postgres
rolls one statement back. Each of the driver's statements is a transaction of its own, so the
victim changed nothing and running it again is safe: the settle is still fenced on its claim,
the claim still takes only claimable rows.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import asyncpg

T = TypeVar("T")

DEADLOCK_RETRIES = 3


async def retry_deadlock(fn: Callable[..., Awaitable[T]], *args: Any) -> T:
    """``await fn(*args)``, again (after a few ms) when Postgres broke a deadlock with it."""
    for attempt in range(DEADLOCK_RETRIES):
        try:
            return await fn(*args)
        except asyncpg.DeadlockDetectedError:
            if attempt == DEADLOCK_RETRIES - 1:
                raise
            await asyncio.sleep(random.uniform(0.001, 0.01) * (attempt + 1))
    raise AssertionError("unreachable")
