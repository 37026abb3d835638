"""A statement Postgres rolled back to break a deadlock is sent again, a bounded number of
times; any other error is not retried."""

from __future__ import annotations

import asyncpg
import pytest

from ujobs.drivers.postgres.deadlock_retry import DEADLOCK_RETRIES, retry_deadlock


async def test_a_deadlock_victim_runs_again() -> None:
    calls: list[int] = []

    async def statement(value: int) -> int:
        calls.append(value)
        if len(calls) == 1:
            raise asyncpg.DeadlockDetectedError("deadlock detected")
        return value * 2

    assert await retry_deadlock(statement, 21) == 42
    assert calls == [21, 21]


async def test_retries_are_bounded_and_other_errors_pass_through() -> None:
    calls = 0

    async def always_deadlocks() -> None:
        nonlocal calls
        calls += 1
        raise asyncpg.DeadlockDetectedError("deadlock detected")

    with pytest.raises(asyncpg.DeadlockDetectedError):
        await retry_deadlock(always_deadlocks)
    assert calls == DEADLOCK_RETRIES

    async def broken() -> None:
        nonlocal calls
        calls += 1
        raise asyncpg.UniqueViolationError("duplicate")

    calls = 0
    with pytest.raises(asyncpg.UniqueViolationError):
        await retry_deadlock(broken)
    assert calls == 1
