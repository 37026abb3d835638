"""The scheduler: ``storm.every-second`` (``run-all`` catch-up) under two ``ujobs scheduler``
processes; the storm SIGKILLs whichever holds the leader lease.

``occurrences_missed``: seconds between the first and the last occurrence fired with no
``storm.tick`` row; ``occurrences_doubled``: rows beyond one for an occurrence."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tests.chaos.fleet import Role, service_env
from tests.chaos.participant import StormContext

if TYPE_CHECKING:
    from tests.chaos.fleet import Member

SCHEDULERS = 2
LEASE_TTL_MS = 3_000


class CronTask:
    name = "cron"

    def fleet_env(self) -> dict[str, str]:
        return {}

    def roles(self, ctx: StormContext) -> list[tuple[Role, int]]:
        env = service_env(
            ctx.url,
            UJOBS_SCHEDULER_LEASE_TTL_MS=str(LEASE_TTL_MS),
            UJOBS_SCHEDULER_TICK_INTERVAL_MS="200",
        )
        return [(Role("scheduler", ("scheduler",), env), SCHEDULERS)]

    async def ready(self, ctx: StormContext) -> None:
        return None

    async def victims(self, ctx: StormContext) -> list[Member]:
        holder = await ctx.pool.fetchval(
            "select holder from x_job_leases where key = 'scheduler' and slot = 0"
        )
        if holder is None:
            return []
        pid = int(str(holder).split(":")[1])
        return [m for m in ctx.fleet.alive("scheduler") if m.proc.pid == pid]

    async def load(self, ctx: StormContext) -> None:
        return None  # the scheduler is the load

    async def check(self, ctx: StormContext) -> dict[str, Any]:
        rows = await ctx.pool.fetch(
            "select (input->>'occurrence_ms')::bigint as at, count(*) as n from x_jobs"
            " where name = 'storm.tick' group by 1"
        )
        if not rows:
            return {"occurrences": 0, "occurrences_missed": None, "occurrences_doubled": None}
        seen = {int(r["at"]): int(r["n"]) for r in rows}
        first, last = min(seen), max(seen)
        expected = range(first, last + 1, 1000)
        missed = [at for at in expected if at not in seen]
        return {
            "occurrences": len(expected),
            "occurrences_missed": len(missed),
            "occurrences_missed_at": missed[:10],
            "occurrences_doubled": sum(n - 1 for n in seen.values() if n > 1),
        }
