"""The storm: workers and every participant's processes on a PRIVATE Postgres, a load from
each participant, and for ``budget_s`` the chaos — SIGKILLs spread evenly over the budget
(round robin over the workers and each participant's victims, then a random member), Postgres
restarts, and workers frozen with SIGSTOP past their lease. Then the load stops, the system
drains, and the core checks (``checker``) and each participant's run on the database.

``run_storm(pg, participants, config, logs)`` answers one dict: the figures of the issue for
the parts present, plus ``kills``, ``restarts``, ``stops`` and the samples behind any miss.
"""

from __future__ import annotations

import asyncio
import json
import random
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg

from tests.chaos.checker import SETTLED, Disruptions, check_core
from tests.chaos.fleet import Fleet, Role, service_env
from tests.chaos.participant import Participant, StormContext
from tests.chaos.storm_app import LEDGER_DDL
from tests.support.restartable import PrivatePostgres
from ujobs.drivers.postgres.migrate import migrate

JOB_ROWS = (
    "select id, name, state, input, run_at > now() - interval '5 seconds' as fresh"
    " from x_jobs where name like 'storm.%'"
)
"""``fresh``: due in the last seconds (the scheduler fires on through the checks): not stuck."""
DONE_COUNTED = (
    "select job, sum(done)::bigint as done from x_job_counters where job like 'storm.%'"
    " group by job"
)
LEDGER_ROWS = "select job_id, step, attempt, pid, at_ms from storm_ledger order by at_ms, ctid"
UNSETTLED = (
    "select (select count(*) from x_jobs where name like 'storm.%' and state <> all($1::text[]))"
    " + (select count(*) from x_outbox where published_at is null)"
)
PG_SETTINGS = {"max_connections": "400"}
"""The storm's private Postgres: ~16 services with a pool of 10 (UJOBS_PG_POOL_SIZE) each,
their LISTEN sessions and job bodies' ledger pools pass the default 100, and a replacement
refused with 'too many clients' at start is the storm's sizing, not a finding."""
READY_TIMEOUT_S = 60.0
"""How long the processes may take to answer before the load and the chaos begin."""


@dataclass(frozen=True)
class StormConfig:
    budget_s: float = 60.0
    kills: int = 20
    pg_restarts: int = 1
    stops: int = 1
    workers: int = 3
    concurrency: int = 8
    lease_ms: int = 3_000
    rate_per_s: float = 20.0
    """Enqueues a second, per participant that enqueues."""
    drain_timeout_s: float = 120.0
    seed: int = 29


async def fresh_database(pg: PrivatePostgres, name: str) -> str:
    admin = await asyncpg.connect(pg.url)
    try:
        await admin.execute(f'drop database if exists "{name}"')
        await admin.execute(f'create database "{name}"')
    finally:
        await admin.close()
    url = pg.url.rsplit("/", 1)[0] + f"/{name}"
    conn = await asyncpg.connect(url)
    try:
        await migrate(conn)
        await conn.execute(LEDGER_DDL)
    finally:
        await conn.close()
    return url


def _schedule(config: StormConfig) -> list[tuple[float, str]]:
    """(seconds into the budget, action): each kind spread evenly, offset from the others."""
    events: list[tuple[float, str]] = []
    for kind, count, offset in (
        ("kill", config.kills, 0.5),
        ("restart", config.pg_restarts, 0.37),
        ("stop", config.stops, 0.71),
    ):
        events += [(config.budget_s * (i + offset) / count, kind) for i in range(count)]
    return sorted(events)


class Storm:
    def __init__(
        self,
        pg: PrivatePostgres,
        ctx: StormContext,
        participants: Sequence[Participant],
        config: StormConfig,
    ) -> None:
        self.pg = pg
        self.ctx = ctx
        self.participants = participants
        self.config = config
        self.random = random.Random(config.seed)
        self.disruptions = Disruptions()
        self.restarts = 0
        self._kill_turn = 0
        self.exits: list[str] = []
        """Processes that exited without a kill (role:code): a finding when not empty."""
        self.refused_at_start: list[str] = []
        """Replacements a backend refused at start (Postgres restarting): they exit 1 with
        ``X_DRIVER_UNAVAILABLE`` by design, and are started again."""
        self._thaws: list[asyncio.Task[None]] = []

    def log(self, action: str, role: str | None, pid: int | None) -> None:
        """One line of what the storm did, in ``chaos.jsonl`` beside the processes' logs."""
        line = {"at_ms": int(time.time() * 1000), "action": action, "role": role, "pid": pid}
        with (self.ctx.fleet.logs / "chaos.jsonl").open("a", encoding="utf-8") as out:
            out.write(json.dumps(line) + "\n")

    async def kill(self) -> None:
        groups: list[tuple[str, Any]] = [("worker", None)]
        groups += [(p.name, p) for p in self.participants]
        name, participant = groups[self._kill_turn % len(groups)]
        self._kill_turn += 1
        victims = []
        if participant is not None:
            try:
                victims = await participant.victims(self.ctx)
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
                victims = []
        if not victims:
            victims = self.ctx.fleet.alive("worker")
        victims = [v for v in victims if v.proc.pid not in self.disruptions.frozen]
        if not victims:
            self.log("kill-skipped", name, None)
            return
        victim = self.random.choice(victims)
        self.disruptions.killed_pids.add(victim.proc.pid)
        self.disruptions.kills += 1
        self.log("kill", victim.role.name, victim.proc.pid)
        self.ctx.fleet.kill_and_replace(victim)

    async def restart_postgres(self) -> None:
        start = int(time.time() * 1000)
        await asyncio.to_thread(self.pg.restart)
        self.restarts += 1
        self.log("pg-restart", None, None)
        # A restart's effects reach past the moment it is back: reconnects, retries.
        self.disruptions.restarts_ms.append((start, int(time.time() * 1000) + 2_000))

    async def stop_worker(self) -> None:
        alive = [
            m for m in self.ctx.fleet.alive("worker") if m.proc.pid not in self.disruptions.frozen
        ]
        if not alive:
            return
        member = self.random.choice(alive)
        member.proc.send_signal(signal.SIGSTOP)
        self.disruptions.stopped_pids.add(member.proc.pid)
        self.disruptions.frozen.add(member.proc.pid)
        self.disruptions.stops += 1
        self.log("stop", member.role.name, member.proc.pid)

        async def thaw() -> None:
            await asyncio.sleep(self.config.lease_ms / 1000 + 1.5)
            member.proc.send_signal(signal.SIGCONT)
            self.disruptions.frozen.discard(member.proc.pid)

        self._thaws.append(asyncio.create_task(thaw()))

    def reap(self) -> None:
        for gone in self.ctx.fleet.reap():
            if gone.refused_at_start:
                self.refused_at_start.append(gone.label)
            else:
                self.exits.append(gone.label)
            self.log("exited", gone.role, gone.code)

    async def chaos(self) -> None:
        began = time.monotonic()
        actions = {"kill": self.kill, "restart": self.restart_postgres, "stop": self.stop_worker}
        for at, kind in _schedule(self.config):
            await asyncio.sleep(max(0.0, began + at - time.monotonic()))
            self.reap()
            await actions[kind]()
        await asyncio.sleep(max(0.0, began + self.config.budget_s - time.monotonic()))
        await asyncio.gather(*self._thaws)

    async def drain(self) -> float | None:
        """Seconds until every storm row is settled and the outbox empty (None: not within
        the drain timeout)."""
        began = time.monotonic()
        while time.monotonic() - began < self.config.drain_timeout_s:
            try:
                if await self.ctx.pool.fetchval(UNSETTLED, list(SETTLED)) == 0:
                    return round(time.monotonic() - began, 1)
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
                pass
            await asyncio.sleep(0.5)
        return None


async def run_storm(
    pg: PrivatePostgres, participants: Sequence[Participant], config: StormConfig, logs: Path
) -> dict[str, Any]:
    url = await fresh_database(pg, "storm")
    pool = await asyncpg.create_pool(url, min_size=2, max_size=8)
    fleet = Fleet(logs)
    for participant in participants:
        fleet.env |= participant.fleet_env()
    ctx = StormContext(url=url, pool=pool, fleet=fleet, rate_per_s=config.rate_per_s)
    storm = Storm(pg, ctx, participants, config)
    worker = Role(
        "worker",
        ("worker", "--queues", "default"),
        service_env(
            url,
            UJOBS_CONCURRENCY=str(config.concurrency),
            UJOBS_VISIBILITY_TIMEOUT_MS=str(config.lease_ms),
        ),
    )
    try:
        for _ in range(config.workers):
            fleet.start(worker)
        for participant in participants:
            for role, count in participant.roles(ctx):
                for _ in range(count):
                    fleet.start(role)
        await _all_ready(participants, ctx, fleet)
        loads = [asyncio.create_task(p.load(ctx)) for p in participants]
        await storm.chaos()
        ctx.stopping.set()
        await asyncio.gather(*loads)
        drained_s = await storm.drain()
        storm.reap()
        await asyncio.sleep(2)  # the scheduler fires the last seconds' occurrences
        # One snapshot: the scheduler fires on, and a tick acked between reading the rows and
        # the counters would look settled twice.
        async with pool.acquire() as conn, conn.transaction(isolation="repeatable_read"):
            jobs = await conn.fetch(JOB_ROWS)
            ledger = await conn.fetch(LEDGER_ROWS)
            counted = {r["job"]: int(r["done"]) for r in await conn.fetch(DONE_COUNTED)}
        figures: dict[str, Any] = {
            **check_core(list(jobs), list(ledger), ctx.acked, storm.disruptions, counted),
            "acked": {source: len(ids) for source, ids in ctx.acked.items()},
            "enqueue_errors": dict(ctx.errors),
            "kills": storm.disruptions.kills,
            "restarts": storm.restarts,
            "stops": storm.disruptions.stops,
            "drained_s": drained_s,
            "exits": storm.exits,
            "refused_at_start": storm.refused_at_start,
        }
        for participant in participants:
            figures |= await participant.check(ctx)
        return figures
    finally:
        fleet.stop_all()
        await pool.close()


async def _all_ready(participants: Sequence[Participant], ctx: StormContext, fleet: Fleet) -> None:
    """Every participant ready within ``READY_TIMEOUT_S``; else an error naming who was not and
    how each member that exited ended (its role, exit code and last log line), not a bare
    timeout."""
    waits = {asyncio.ensure_future(p.ready(ctx)): p for p in participants}
    done, pending = await asyncio.wait(waits, timeout=READY_TIMEOUT_S)
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    for task in done:
        task.result()
    if pending:
        late = sorted(type(waits[task]).__name__ for task in pending)
        exits = [f"{e.label} {e.last_line!r}" for e in fleet.exited()]
        raise AssertionError(
            f"not ready after {READY_TIMEOUT_S:.0f} s: {late}; members that exited: {exits}"
        )
