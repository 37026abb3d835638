"""The Postgres wake (LISTEN/NOTIFY) against a real Postgres: the same proof, re-dial and probe
rules as the Redis wake, fed by the Postgres driver's own throttled ``pg_notify``.

Each test has a database of its own (``pg_dsn``), and notifications never cross databases, so
tests cannot hear each other.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from tests.support.wake import WAIT_S, Heard, is_live, wake_logs
from ujobs.clock import FrozenClock
from ujobs.drivers.base import EnqueueRequest
from ujobs.drivers.postgres.driver import postgres_driver
from ujobs.wake.listener import OUTBOX_WAKE_CHANNEL, PROBE_PREFIX, ChannelWake, postgres_wake
from ujobs.wake.protocol import (
    IDLE_POLL_CEILING_MS,
    WAKE_SLOT_MS,
    WOKEN_IDLE_POLL_CEILING_MS,
    idle_ceiling_ms,
)
from ujobs.wake.transport_postgres import SESSION_APPLICATION_NAME


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger="ujobs.wake")
    return caplog


@pytest.fixture
async def wake(pg_dsn: str, pg_pool: asyncpg.Pool[Any]) -> AsyncIterator[ChannelWake]:
    wake = postgres_wake(pg_dsn, pg_pool)
    await wake.start()
    await wake.signals.wait("live", timeout_s=WAIT_S)
    yield wake
    await wake.stop()


def request(key: str, *, queue: str = "default", run_at_ms: int | None = None) -> EnqueueRequest:
    return EnqueueRequest(
        name="wake-test", input={}, idempotency_key=key, queue=queue, run_at_ms=run_at_ms
    )


async def settle(pool: asyncpg.Pool[Any], heard: Heard, marker: str) -> None:
    """Every notification committed so far has been delivered: one session hears
    notifications in commit order, and ``marker`` committed last."""
    await pool.execute("select pg_notify('x_jobs_wake', $1)", marker)
    await heard.until(marker)


async def session_pid(pool: asyncpg.Pool[Any]) -> int:
    pids = await pool.fetch(
        "select pid from pg_stat_activity where datname = current_database() "
        "and application_name = $1",
        SESSION_APPLICATION_NAME,
    )
    assert len(pids) == 1
    return int(pids[0]["pid"])


async def test_a_probe_through_the_pool_proves_the_listen_session(
    pg_dsn: str, pg_pool: asyncpg.Pool[Any], logs: pytest.LogCaptureFixture
) -> None:
    wake = postgres_wake(pg_dsn, pg_pool)
    assert is_live(wake) is False
    await wake.start()
    try:
        await wake.signals.wait("live", timeout_s=WAIT_S)
        assert is_live(wake) is True
        assert idle_ceiling_ms(wake) == WOKEN_IDLE_POLL_CEILING_MS
        [record] = wake_logs(logs, "jobs.wake.live")
        assert record.transport == "postgres"  # type: ignore[attr-defined]
        assert wake_logs(logs, "jobs.wake.unverified") == []
    finally:
        await wake.stop()
    assert is_live(wake) is False


async def test_the_drivers_enqueue_notifies_the_queue(
    wake: ChannelWake, pg_pool: asyncpg.Pool[Any]
) -> None:
    heard = Heard()
    wake.subscribe(heard)
    driver = postgres_driver(pg_pool)
    await driver.enqueue(request("k", queue="emails"))
    await heard.until("emails")


async def test_the_statement_throttles_per_slot_and_skips_dedupes_and_later_rows(
    wake: ChannelWake, pg_pool: asyncpg.Pool[Any]
) -> None:
    clock = FrozenClock(1_700_000_000_000)
    heard = Heard()
    wake.subscribe(heard)
    driver = postgres_driver(pg_pool, clock=clock)
    for n in range(3):
        await driver.enqueue(request(f"a{n}", queue="a"))
        clock.advance(WAKE_SLOT_MS // 4)
    await settle(pg_pool, heard, "marker-1")
    assert heard.count("a") == 1

    clock.advance(WAKE_SLOT_MS)
    deduped = await driver.enqueue(request("a0", queue="a"))
    assert deduped.deduped is True
    await driver.enqueue(request("late", queue="a", run_at_ms=clock.now_ms() + 1_001))
    await settle(pg_pool, heard, "marker-2")
    assert heard.count("a") == 1

    await driver.enqueue(request("soon", queue="a", run_at_ms=clock.now_ms() + 1_000))
    await settle(pg_pool, heard, "marker-3")
    assert heard.count("a") == 2


async def test_a_listener_on_another_database_stays_unverified_and_says_so_once(
    pg_dsn: str, logs: pytest.LogCaptureFixture
) -> None:
    # The probe goes through a pool on a DIFFERENT database: notifications never cross, as
    # with a proxy that swallows them.
    head, _, _ = pg_dsn.rpartition("/")
    elsewhere = await asyncpg.create_pool(f"{head}/postgres", min_size=1, max_size=1)
    assert elsewhere is not None
    wake = postgres_wake(pg_dsn, elsewhere, probe_timeout_s=0.2, reprobe_every_s=0.05)
    await wake.start()
    try:
        for _ in range(3):
            mark = wake.signals.mark()
            await wake.signals.wait("probe-failed", since=mark, timeout_s=WAIT_S)
        assert wake.live is False
        assert idle_ceiling_ms(wake) == IDLE_POLL_CEILING_MS
        [record] = wake_logs(logs, "jobs.wake.unverified")
        assert record.stage == "probe"  # type: ignore[attr-defined]
        assert "pool_mode = transaction" in record.fix  # type: ignore[attr-defined]
        assert wake_logs(logs, "jobs.wake.live") == []
    finally:
        await wake.stop()
        await elsewhere.close()


async def test_an_unreachable_server_stays_unverified_and_says_so_once(
    pg_pool: asyncpg.Pool[Any], logs: pytest.LogCaptureFixture
) -> None:
    wake = postgres_wake(
        "postgresql://postgres@127.0.0.1:1/nowhere",
        pg_pool,
        backoff_min_s=0.01,
        backoff_max_s=0.02,
    )
    await wake.start()
    try:
        for _ in range(3):
            mark = wake.signals.mark()
            await wake.signals.wait("dial-failed", since=mark, timeout_s=WAIT_S)
        assert wake.live is False
        [record] = wake_logs(logs, "jobs.wake.unverified")
        assert record.stage == "dial"  # type: ignore[attr-defined]
    finally:
        await wake.stop()


async def test_a_terminated_session_is_redialled_and_proven_again(
    wake: ChannelWake, pg_pool: asyncpg.Pool[Any], logs: pytest.LogCaptureFixture
) -> None:
    heard = Heard()
    wake.subscribe(heard)
    pid = await session_pid(pg_pool)
    mark = wake.signals.mark()
    assert await pg_pool.fetchval("select pg_terminate_backend($1)", pid)
    await wake.signals.wait("lost", since=mark, timeout_s=WAIT_S)
    await wake.signals.wait("live", since=mark, timeout_s=WAIT_S)
    assert wake.live is True
    # caplog.records holds this test's call phase: the fixture's first proof is not in it.
    assert len(wake_logs(logs, "jobs.wake.lost")) == 1
    assert len(wake_logs(logs, "jobs.wake.live")) == 1
    assert await session_pid(pg_pool) != pid
    await postgres_driver(pg_pool).enqueue(request("k", queue="after-redial"))
    await heard.until("after-redial")


async def test_probes_never_reach_subscribers(
    pg_dsn: str, wake: ChannelWake, pg_pool: asyncpg.Pool[Any]
) -> None:
    heard_first = Heard()
    wake.subscribe(heard_first)
    second = postgres_wake(pg_dsn, pg_pool)
    heard_second = Heard()
    second.subscribe(heard_second)
    mark = wake.signals.mark()
    await second.start()
    try:
        await second.signals.wait("live", timeout_s=WAIT_S)
        await wake.signals.wait("probe", since=mark, timeout_s=WAIT_S)  # the second's probe
        await pg_pool.execute("select pg_notify('x_jobs_wake', $1)", f"{PROBE_PREFIX}fake")
        await settle(pg_pool, heard_first, "real")
        await heard_second.until("real")
        assert heard_first.payloads == ["real"]
        assert heard_second.payloads == ["real"]
    finally:
        await second.stop()


async def test_one_session_carries_the_outbox_channel_for_the_relay(
    pg_dsn: str, pg_pool: asyncpg.Pool[Any]
) -> None:
    wake = postgres_wake(pg_dsn, pg_pool, channels=("x_jobs_wake", OUTBOX_WAKE_CHANNEL))
    jobs, outbox = Heard(), Heard()
    wake.subscribe(jobs)
    relay_wake = wake.channel(OUTBOX_WAKE_CHANNEL)
    relay_wake.subscribe(outbox)
    await wake.start()
    try:
        await wake.signals.wait("live", timeout_s=WAIT_S)
        assert relay_wake.live is True
        await pg_pool.execute("select pg_notify($1, '')", OUTBOX_WAKE_CHANNEL)
        await outbox.until("")
        await settle(pg_pool, jobs, "marker")
        assert jobs.payloads == ["marker"]
        assert outbox.payloads == [""]
    finally:
        await wake.stop()
    assert relay_wake.live is False
