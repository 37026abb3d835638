"""The relay's wakes: a COMMIT starts a pass at once through LISTEN ``x_outbox_wake`` (the
worker's ``postgres_wake``, alone or as one channel of a shared session), a proven wake raises
the idle ceiling, and a publish wakes this process's workers."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.outbox import Pool, Wired, billing_jobs, relay_for, wire
from ujobs.context import transaction
from ujobs.outbox import OUTBOX_WAKE_CHANNEL
from ujobs.outbox.relay import IDLE_POLL_CEILING_MS, WOKEN_IDLE_POLL_CEILING_MS
from ujobs.wake.announce import announcing
from ujobs.wake.listener import POSTGRES_WAKE_CHANNEL, postgres_wake
from ujobs.wake.local import on_enqueued

HOUR_MS = 3_600_000


async def test_a_commit_wakes_an_idle_relay_that_would_otherwise_wait_an_hour(
    pg_dsn: str, pg_pool: Pool
) -> None:
    billing = billing_jobs()
    wired = wire(pg_pool)
    wake = postgres_wake(pg_dsn, pg_pool, channels=(OUTBOX_WAKE_CHANNEL,))
    # Polling alone would next look in an hour: only the wake can explain a prompt publish.
    relay = relay_for(wired, interval_ms=HOUR_MS, wake=wake)
    assert relay.idle_ceiling_ms == HOUR_MS
    try:
        await wake.start()
        await wake.signals.wait("live")
        await relay.start()
        await relay.signals.wait("pass")  # the first pass, on start: nothing yet
        async with pg_pool.acquire() as conn, transaction(conn):
            queued = await billing.create_invoice.enqueue({"order": "o1"})
        hit = await relay.signals.wait("pass", lambda p: queued.id in p.published)
        assert hit.published == [queued.id]
    finally:
        await relay.stop()
        await wake.stop()


async def test_one_session_serves_the_worker_and_the_relay(pg_dsn: str, pg_pool: Pool) -> None:
    billing = billing_jobs()
    wired = wire(pg_pool)
    wake = postgres_wake(pg_dsn, pg_pool, channels=(POSTGRES_WAKE_CHANNEL, OUTBOX_WAKE_CHANNEL))
    outbox_channel = wake.channel(OUTBOX_WAKE_CHANNEL)
    relay = relay_for(wired, interval_ms=HOUR_MS, wake=outbox_channel)
    try:
        await wake.start()
        await wake.signals.wait("live")
        await relay.start()
        await relay.signals.wait("pass")
        async with pg_pool.acquire() as conn, transaction(conn):
            queued = await billing.create_invoice.enqueue({"order": "o1"})
        await relay.signals.wait("pass", lambda p: queued.id in p.published)
    finally:
        await relay.stop()
        await wake.stop()


async def test_a_proven_wake_raises_the_idle_ceiling(pg_dsn: str, pg_pool: Pool) -> None:
    wired = wire(pg_pool)
    wake = postgres_wake(pg_dsn, pg_pool, channels=(OUTBOX_WAKE_CHANNEL,))
    relay = relay_for(wired, wake=wake)
    assert relay.idle_ceiling_ms == IDLE_POLL_CEILING_MS  # not proven yet: 2 s
    try:
        await wake.start()
        await wake.signals.wait("live")
        assert relay.idle_ceiling_ms == WOKEN_IDLE_POLL_CEILING_MS  # proven: 5 s
        delays = []
        for _ in range(7):
            await relay.run_once()
            delays.append(relay.delay_ms)
        assert delays == [200, 400, 800, 1600, 3200, 5000, 5000]  # 12 claims per idle minute
    finally:
        await wake.stop()


@pytest.fixture
def local_wakes() -> Iterator[list[str]]:
    """The queues this process's workers were told about (``signal_enqueued``)."""
    heard: list[str] = []
    unsubscribe = on_enqueued(heard.append)
    yield heard
    unsubscribe()


async def test_a_publish_wakes_this_processs_workers_once(
    pg_pool: Pool, local_wakes: list[str]
) -> None:
    billing = billing_jobs()
    wired = wire(pg_pool)
    async with pg_pool.acquire() as conn, transaction(conn):
        await billing.create_invoice.enqueue({"order": "o1"})
    await relay_for(wired).run_once()  # a bare driver: the relay signals
    assert local_wakes == ["default"]

    async with pg_pool.acquire() as conn, transaction(conn):
        await billing.charge_card.enqueue({"order": "o1"})
        await billing.create_invoice.enqueue({"order": "o1"})  # its key is live: a dedupe
    announced = Wired(announcing(wired.driver), wired.store)  # type: ignore[arg-type]
    result = await relay_for(announced).run_once()
    assert len(result.deduped) == 1
    assert local_wakes == ["default", "default"]  # the driver signalled, once; no dedupe
