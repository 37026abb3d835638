"""Leader election for the scheduler: the ``Leader`` contract and ``always_leader``.

One scheduler dispatches at a time. ``acquire()`` is both the first take and every renewal, so
it is also how a demoted node learns it lost: its next ``acquire()`` answers False. The
scheduler calls it every ``renew_every_ms`` (a third of the lease's TTL), never every round, and
stops dispatching on its own once ``ttl_ms`` has passed since the last renewal that landed, so a
node whose store went away does not keep firing on a lease that lapsed.

``always_leader()`` is the default and is not safe to deploy: a rolling update runs two
leaders. ``postgres_lease_leader`` (``ujobs.scheduler.leader_postgres``) is a lease ROW with an
expiry, never a session advisory lock — the executor is a pool, and an advisory lock is released the
moment its connection goes back to it, so every node would read itself as leader.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

DEFAULT_LEASE_TTL_MS = 30_000


def renew_every(ttl_ms: int) -> int:
    """A third of the TTL: two renewals can fail before the lease lapses."""
    return max(1, ttl_ms // 3)


@runtime_checkable
class Leader(Protocol):
    @property
    def exclusive(self) -> bool:
        """Whether two nodes can never both hold it (the unsafe-defaults warning reads it)."""
        ...

    @property
    def renew_every_ms(self) -> int:
        """How often the scheduler calls ``acquire()``, leader and standby alike."""
        ...

    @property
    def ttl_ms(self) -> int | None:
        """How long a successful ``acquire()`` holds without another; None: forever."""
        ...

    async def acquire(self) -> bool:
        """Take or renew the lease; False when another node holds it."""
        ...

    async def release(self) -> None:
        """Hand the lease back so a standby takes over at its next ``acquire()``."""
        ...


class AlwaysLeader:
    """Every node leads. Correct for exactly one scheduler process; see the module docstring."""

    exclusive = False
    ttl_ms: int | None = None

    def __init__(self, renew_every_ms: int = renew_every(DEFAULT_LEASE_TTL_MS)) -> None:
        self.renew_every_ms = renew_every_ms
        self.released = False

    async def acquire(self) -> bool:
        self.released = False
        return True

    async def release(self) -> None:
        self.released = True


def always_leader() -> AlwaysLeader:
    return AlwaysLeader()
