"""``postgres_lease_leader``: the scheduler's leader lease, a ROW in ``x_job_leases``.

Not ``pg_try_advisory_lock``: an advisory lock belongs to a Postgres SESSION, and the executor
is a pool — the lock is released the moment its connection goes back, so every node would
read itself as leader. A row with an expiry needs no connection affinity: ``acquire()`` takes
it when it is free or lapsed and renews it when it is ours, in one statement, and answers False
to everyone else. A leader SIGKILLed mid-round holds it until the TTL passes; then the first
standby to ask takes over. ``release()`` on a clean drain hands it over at once.

Time: by default the DATABASE clock stamps and compares expiries, so nodes whose clocks
disagree still agree on who leads. Pass ``clock=`` (a ``FrozenClock`` in tests) to stamp with
it instead.
"""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass

from ujobs.clock import Clock
from ujobs.drivers.postgres.executor import PgExecutor
from ujobs.drivers.postgres.sql import query
from ujobs.errors import ConfigInvalidError
from ujobs.scheduler.leader import DEFAULT_LEASE_TTL_MS, renew_every

DEFAULT_LEADER_KEY = "scheduler"

_ACQUIRE = query("leader_acquire")
_RELEASE = query("leader_release")
_HOLDER = query("leader_holder")


@dataclass(frozen=True, slots=True)
class LeaseHolder:
    holder: str
    acquired_at_ms: int
    expires_at_ms: int


def default_holder() -> str:
    """``host:pid:random`` — unique per process start, readable by an operator."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class PostgresLeaseLeader:
    """``Leader`` over one ``x_job_leases`` row; renewed every third of its TTL."""

    exclusive = True

    def __init__(
        self,
        executor: PgExecutor,
        *,
        key: str = DEFAULT_LEADER_KEY,
        ttl_ms: int = DEFAULT_LEASE_TTL_MS,
        holder: str | None = None,
        clock: Clock | None = None,
    ) -> None:
        if isinstance(ttl_ms, bool) or not isinstance(ttl_ms, int) or ttl_ms < 3:
            raise ConfigInvalidError(
                f"ttl_ms must be a whole number of milliseconds, 3 or more; got {ttl_ms!r}",
                meta={"option": "ttl_ms"},
            )
        if not key:
            raise ConfigInvalidError("key must be a non-empty string", meta={"option": "key"})
        self.executor = executor
        self.key = key
        self._ttl_ms = ttl_ms
        self.holder = holder or default_holder()
        self.clock = clock

    @property
    def ttl_ms(self) -> int:
        return self._ttl_ms

    @property
    def renew_every_ms(self) -> int:
        return renew_every(self._ttl_ms)

    def _now(self) -> int | None:
        return self.clock.now_ms() if self.clock is not None else None

    async def acquire(self) -> bool:
        rows = await self.executor.fetch(_ACQUIRE, self.key, self.holder, self._now(), self._ttl_ms)
        return bool(rows)

    async def release(self) -> None:
        await self.executor.fetch(_RELEASE, self.key, self.holder)

    async def current(self) -> LeaseHolder | None:
        """Who holds the row now (it may have lapsed: compare ``expires_at_ms``)."""
        rows = await self.executor.fetch(_HOLDER, self.key)
        if not rows:
            return None
        row = rows[0]
        return LeaseHolder(row["holder"], int(row["acquired_at_ms"]), int(row["expires_at_ms"]))


def postgres_lease_leader(
    *,
    executor: PgExecutor,
    key: str = DEFAULT_LEADER_KEY,
    ttl_ms: int = DEFAULT_LEASE_TTL_MS,
    holder: str | None = None,
    clock: Clock | None = None,
) -> PostgresLeaseLeader:
    """The leader lease for ``job_scheduler(leader=...)`` in any real deployment."""
    return PostgresLeaseLeader(executor, key=key, ttl_ms=ttl_ms, holder=holder, clock=clock)
