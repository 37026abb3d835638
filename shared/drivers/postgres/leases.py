"""Fleet leases in ``x_job_leases``: at most ``limit`` live holders per key, one row per slot.

``job.concurrency`` is enforced here (keys ``job:<name>`` and ``job-key:<name>:<key>``). A
slot is a row with an expiry, renewed by the worker's heartbeat and reclaimed by the next
acquirer once its TTL lapses, so a SIGKILLed holder needs no cleanup. Times come from the
driver's clock.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import asyncpg

from ujobs.clock import Clock
from ujobs.drivers.postgres.deadlock_retry import retry_deadlock
from ujobs.drivers.postgres.settle_batch import SettleBatcher
from ujobs.drivers.postgres.sql import query
from ujobs.errors import InvariantError

if TYPE_CHECKING:
    Pool = asyncpg.Pool[Any]

_ACQUIRE_MANY = query("lease_acquire")
_RENEW = query("lease_renew")
_RELEASE = query("lease_release")
_HOLDERS = query("lease_holders")

ACQUIRE_RACES = 5

OPERATION_QUERIES: dict[str, tuple[str, ...]] = {
    "acquire": ("lease_acquire",),
    "renew": ("lease_renew",),
    "release": ("lease_release",),
    "holders": ("lease_holders",),
}


def job_lease_key(name: str, key: str | None = None) -> str:
    """``job:<name>`` for a job's plain cap, ``job-key:<name>:<key>`` for a keyed one."""
    return f"job:{name}" if key is None else f"job-key:{name}:{key}"


@dataclass(frozen=True, slots=True)
class _Acquire:
    key: str
    holder: str
    limit: int
    ttl_ms: int


def _distinct_keys(requests: list[_Acquire]) -> tuple[list[_Acquire], list[_Acquire]]:
    """The first request of each key, and the rest (for a later statement)."""
    first: list[_Acquire] = []
    rest: list[_Acquire] = []
    seen: set[str] = set()
    for request in requests:
        (rest if request.key in seen else first).append(request)
        seen.add(request.key)
    return first, rest


class PostgresLeaseStore:
    """``LeaseStore`` for the Postgres driver (``driver.leases``)."""

    def __init__(self, pool: Pool, clock: Clock) -> None:
        self._pool = pool
        self._clock = clock
        self._acquires: SettleBatcher[_Acquire] = SettleBatcher(self._acquire_many)
        self._releases: SettleBatcher[tuple[str, str]] = SettleBatcher(self._release_many)

    async def acquire(self, key: str, holder: str, limit: int, ttl_ms: int) -> bool:
        if limit < 1 or ttl_ms < 1:
            raise InvariantError(
                "a lease needs a limit and a ttl of at least 1",
                meta={"key": key, "limit": limit, "ttl_ms": ttl_ms},
            )
        return await self._acquires.submit(_Acquire(key, holder, limit, ttl_ms))

    async def _acquire_many(self, requests: Sequence[_Acquire]) -> set[_Acquire]:
        """The requests that hold their slot. Each statement takes requests of distinct keys
        (a second request for a key waits for the next one); a request that lost a race for
        a free slot to a concurrent acquirer looks again, up to ``ACQUIRE_RACES`` times."""
        held: set[_Acquire] = set()
        todo = list(requests)
        for _ in range(ACQUIRE_RACES):
            lost: list[_Acquire] = []
            while todo:
                batch, todo = _distinct_keys(todo)
                rows = await retry_deadlock(
                    self._pool.fetch,
                    _ACQUIRE_MANY,
                    [r.key for r in batch],
                    [r.holder for r in batch],
                    [r.limit for r in batch],
                    self._clock.now_ms(),
                    [r.ttl_ms for r in batch],
                )
                answers = {row["key"]: (row["held"], row["tried"]) for row in rows}
                for request in batch:
                    got, tried = answers[request.key]
                    if got:
                        held.add(request)
                    elif tried:
                        lost.append(request)
            if not lost:
                break
            todo = lost
        return held

    async def renew(self, key: str, holder: str, ttl_ms: int) -> bool:
        slot = await self._pool.fetchval(_RENEW, key, holder, self._clock.now_ms(), ttl_ms)
        return slot is not None

    async def release(self, key: str, holder: str) -> None:
        """Answers once the slot is free. Releases that arrive while one is in flight go
        together in the next statement: a worker finishing 16 runs at once pays one commit
        for their slots, not 16 (an idle one pays no added wait)."""
        await self._releases.submit((key, holder))

    async def _release_many(self, pairs: Sequence[tuple[str, str]]) -> set[tuple[str, str]]:
        await retry_deadlock(
            self._pool.execute, _RELEASE, [k for k, _ in pairs], [h for _, h in pairs]
        )
        return set(pairs)

    async def close(self) -> None:
        """Wait for the acquires and releases already submitted (the driver's ``close``)."""
        await self._acquires.join()
        await self._releases.join()

    async def holders(self, key: str) -> builtins.list[str]:
        rows = await self._pool.fetch(_HOLDERS, key, self._clock.now_ms())
        return [r["holder"] for r in rows]
