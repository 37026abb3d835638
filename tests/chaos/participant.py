"""What one family of the storm is: a ``Participant`` brings its processes (roles), its load
and its checks. The harness (``tests.chaos.harness``) runs the workers, the chaos and the
core checks; a family that lands later (NATS, webhooks, exports) is one more module here."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from tests.chaos.fleet import Fleet, Member, Role


@dataclass
class StormContext:
    """What every participant sees: the storm's database (URL and a pool in this process),
    the stop signal of the load, the fleet, and how fast to enqueue."""

    url: str
    pool: Any
    """An ``asyncpg.Pool`` in this process, on the storm's database."""
    fleet: Fleet
    rate_per_s: float
    stopping: asyncio.Event = field(default_factory=asyncio.Event)
    acked: dict[str, list[str]] = field(default_factory=dict)
    """Job ids each participant's enqueues were ANSWERED with (lost = acked, no row)."""
    errors: dict[str, int] = field(default_factory=dict)
    """Enqueues that failed (the storm restarted Postgres under them): never acknowledged."""

    def ack(self, source: str, job_id: str) -> None:
        self.acked.setdefault(source, []).append(job_id)

    def error(self, source: str) -> None:
        self.errors[source] = self.errors.get(source, 0) + 1

    async def pace(self) -> bool:
        """Wait one load interval; False once the load should stop."""
        try:
            await asyncio.wait_for(self.stopping.wait(), 1 / self.rate_per_s)
        except TimeoutError:
            return True
        return False


class Participant(Protocol):
    name: str

    def fleet_env(self) -> dict[str, str]:
        """Settings EVERY process of the storm gets (the workers' included: a settlement is
        written by whichever process settles), read before the first one starts."""
        ...

    def roles(self, ctx: StormContext) -> list[tuple[Role, int]]:
        """The processes this family runs during the storm, and how many of each."""
        ...

    async def ready(self, ctx: StormContext) -> None:
        """Return once this family's processes answer: the load and the chaos start after
        every family is ready (on a loaded machine an api may take seconds to listen)."""
        ...

    async def victims(self, ctx: StormContext) -> list[Member]:
        """The members a kill of this family may hit now (the scheduler: only its leader)."""
        ...

    async def load(self, ctx: StormContext) -> None:
        """Enqueue until ``ctx.stopping``; record what was acknowledged with ``ctx.ack``."""
        ...

    async def check(self, ctx: StormContext) -> dict[str, Any]:
        """This family's figures, read after the drain."""
        ...
