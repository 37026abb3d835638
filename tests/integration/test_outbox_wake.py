"""The relay's LISTEN wake: a commit starts a pass at once, the wake is proven before the idle
ceiling rises, and a lost session is re-dialled."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg

from shared.context import transaction
from shared.outbox import postgres_outbox_wake
from shared.outbox_relay import IDLE_POLL_CEILING_MS, WOKEN_IDLE_POLL_CEILING_MS
from tests.integration.outbox_kit import Pool, billing_jobs, relay_for, wire

HOUR_MS = 3_600_000


async def _until(predicate: Any, timeout_s: float = 10.0) -> None:
    """Poll ``predicate`` (a state no signal announces) with a generous timeout."""
    async with asyncio.timeout(timeout_s):
        while not predicate():
            await asyncio.sleep(0.01)


async def test_a_commit_wakes_an_idle_relay_that_would_otherwise_wait_an_hour(
    pg_dsn: str, pg_pool: Pool
) -> None:
    billing = billing_jobs()
    wired = wire(pg_pool)

    async def connect() -> asyncpg.Connection[Any]:
        return await asyncpg.connect(pg_dsn)

    wake = postgres_outbox_wake(connect=connect, executor=pg_pool)
    await wake.start()
    assert wake.live  # the probe came back on the session
    # Polling alone would next look in an hour: only the wake can explain a prompt publish.
    relay = relay_for(wired, interval_ms=HOUR_MS, idle_poll_max_ms=HOUR_MS, wake=wake)
    assert relay.idle_ceiling_ms == HOUR_MS
    try:
        await relay.start()
        await relay.signals.wait("pass")  # the first pass, on start: nothing yet
        async with pg_pool.acquire() as conn, transaction(conn):
            queued = await billing.create_invoice.enqueue({"order": "o1"})
        hit = await relay.signals.wait("pass", lambda p: queued.id in p.published)
        assert hit.published == [queued.id]
    finally:
        await relay.stop()
        await wake.stop()
        await wake.stop()  # safe twice


async def test_a_proven_wake_raises_the_idle_ceiling_and_a_lost_session_is_redialled(
    pg_dsn: str, pg_pool: Pool
) -> None:
    billing = billing_jobs()
    wired = wire(pg_pool)
    sessions: list[asyncpg.Connection[Any]] = []

    async def connect() -> asyncpg.Connection[Any]:
        conn = await asyncpg.connect(pg_dsn)
        sessions.append(conn)
        return conn

    wake = postgres_outbox_wake(connect=connect, executor=pg_pool)
    defaults = relay_for(wired, wake=wake)
    assert defaults.idle_ceiling_ms == IDLE_POLL_CEILING_MS  # not proven yet: 2 s
    await wake.start()
    assert defaults.idle_ceiling_ms == WOKEN_IDLE_POLL_CEILING_MS  # proven: 5 s
    relay = relay_for(wired, interval_ms=HOUR_MS, wake=wake)
    try:
        await relay.start()
        await relay.signals.wait("pass")
        # The session dies (a failover, an idle-connection reaper): the wake is not live ...
        pid = sessions[0].get_server_pid()
        await pg_pool.execute("select pg_terminate_backend($1)", pid)
        await _until(lambda: len(sessions) == 2 and wake.live)
        # ... until it is re-dialled and proven again; then a commit wakes the relay again.
        mark = relay.signals.mark()
        async with pg_pool.acquire() as conn, transaction(conn):
            queued = await billing.create_invoice.enqueue({"order": "o1"})
        await relay.signals.wait("pass", lambda p: queued.id in p.published, since=mark)
    finally:
        await relay.stop()
        await wake.stop()
    assert not wake.live


async def test_a_wake_that_never_comes_back_stays_unproven_and_logs_once(
    pg_dsn: str, pg_pool: Pool, caplog: Any
) -> None:
    async def connect() -> asyncpg.Connection[Any]:
        return await asyncpg.connect(pg_dsn)

    class SilentExecutor:
        """A pool whose probe goes to another database, as through a proxy that drops it."""

        def __init__(self, pool: Pool) -> None:
            self.pool = pool

        async def fetch(self, query: str, *args: Any) -> list[Any]:
            return await self.pool.fetch("select $1::text as ignored", *args)

    wake = postgres_outbox_wake(
        connect=connect, executor=SilentExecutor(pg_pool), probe_timeout_ms=50
    )
    await wake.start()
    try:
        assert not wake.live
        unverified = [r for r in caplog.records if r.getMessage() == "jobs.wake.unverified"]
        assert len(unverified) == 1
    finally:
        await wake.stop()
