"""``ujobs relay``: the outbox relay as its own service.

Reads ``DATABASE_URL``, builds the Postgres driver, the ``x_outbox`` store, the LISTEN wake
on ``x_outbox_wake`` (a session of its own) and the relay, and publishes committed outbox rows
until SIGTERM / SIGINT. Each publish is announced the way a direct enqueue is: the enqueue
statement's own ``pg_notify`` for LISTEN workers, and, when ``REDIS_URL`` is set, the Redis
wake channel the workers subscribe to by default.

The drain stops polling, waits out the pass in flight (a publish, then its mark) under the
process drain deadline, closes the wake and the pool, and exits 0. It applies nothing to
the schema: run ``ujobs db migrate`` first.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from typing import Annotated, Any

import asyncpg
import typer

from shared.drivers.postgres import postgres_driver
from shared.errors import DriverUnavailableError, UltimateError
from shared.lifecycle import handle_signals, wait_drained
from shared.outbox import OUTBOX_WAKE_CHANNEL, outbox_relay, postgres_outbox_store
from shared.outbox_relay import DEFAULT_BATCH_SIZE, DEFAULT_CLAIM_LEASE_MS
from shared.wake import postgres_wake
from shared.wake_announce import announcing, redis_announcer

log = logging.getLogger("ujobs.relay")


async def serve(
    database_url: str, *, redis_url: str | None, claim_lease_ms: int, batch_size: int
) -> None:
    """Run the relay until the process lifecycle drains (a signal, or ``drain()``)."""
    pool: asyncpg.Pool[Any] | None = await asyncpg.create_pool(database_url, min_size=1, max_size=4)
    assert pool is not None
    announcer = redis_announcer(redis_url) if redis_url else None
    try:
        driver = announcing(postgres_driver(pool), announcer)
        wake = postgres_wake(database_url, pool, channels=(OUTBOX_WAKE_CHANNEL,))
        relay = outbox_relay(
            store=postgres_outbox_store(executor=pool),
            driver=driver,
            wake=wake,
            claim_lease_ms=claim_lease_ms,
            batch_size=batch_size,
        )
        remove_handlers = handle_signals()
        try:
            await wake.start()
            await relay.start()
            sys.stdout.write(f"ujobs relay: publishing x_outbox as {relay.relay_id}\n")
            sys.stdout.flush()
            await wait_drained()
        finally:
            remove_handlers()
            await relay.stop()
            await wake.stop()
            await driver.close()
    finally:
        if announcer is not None:
            await announcer.close()
        await pool.close()


def relay_command(
    database_url: Annotated[
        str | None,
        typer.Option("--database-url", envvar="DATABASE_URL", help="postgresql://… of x_outbox"),
    ] = None,
    redis_url: Annotated[
        str | None,
        typer.Option(
            "--redis-url", envvar="REDIS_URL", help="announce publishes on the Redis wake"
        ),
    ] = None,
    claim_lease_ms: Annotated[
        int,
        typer.Option(
            "--claim-lease-ms",
            envvar="UJOBS_OUTBOX_CLAIM_LEASE_MS",
            help="how long a dead relay's claimed rows wait before another relay takes them",
        ),
    ] = DEFAULT_CLAIM_LEASE_MS,
    batch_size: Annotated[
        int,
        typer.Option("--batch-size", envvar="UJOBS_OUTBOX_BATCH_SIZE", help="rows per claim"),
    ] = DEFAULT_BATCH_SIZE,
) -> None:
    """Run the outbox relay: publish committed x_outbox rows onto the queue; drain on SIGTERM."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    try:
        if not database_url:
            raise DriverUnavailableError("no database: pass --database-url or set DATABASE_URL")
        asyncio.run(
            serve(
                database_url,
                redis_url=redis_url,
                claim_lease_ms=claim_lease_ms,
                batch_size=batch_size,
            )
        )
    except UltimateError as exc:
        sys.stderr.write(f"{exc.code}: {exc.message}\n")
        raise typer.Exit(code=1) from exc
    except (OSError, asyncpg.PostgresError) as exc:
        sys.stderr.write(f"X_DRIVER_UNAVAILABLE: the relay could not reach Postgres: {exc}\n")
        raise typer.Exit(code=1) from exc
