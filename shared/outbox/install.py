"""``install_outbox``: the outbox on Postgres in one call (driver, facade, wake, relay).

What it does is what the three steps of the package docstring do by hand: install
``announcing(postgres_driver(pool))`` as the job driver (unless a ``driver`` is given), install
the staging facade over ``postgres_outbox_store(pool)``, and start the ``x_outbox_wake``
listener and a relay in this process (``relay=False`` when ``ujobs relay`` runs as its own
service). ``await outbox.stop()`` joins the relay's pass in flight, stops the listener and
uninstalls the facade and the driver; do it before closing the pool.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ujobs.drivers.base import JobDriver
from ujobs.drivers.postgres.driver import postgres_driver
from ujobs.jobs.enqueue_target import set_job_driver, set_jobs_facade
from ujobs.outbox.contract import OUTBOX_WAKE_CHANNEL
from ujobs.outbox.relay import OutboxRelay, outbox_relay
from ujobs.outbox.staging_facade import OutboxJobsFacade, OutboxMode, outbox_jobs_facade
from ujobs.outbox.store_postgres import PostgresOutboxStore, postgres_outbox_store
from ujobs.wake.announce import announcing
from ujobs.wake.listener import ChannelWake, postgres_wake

if TYPE_CHECKING:
    import asyncpg

    from ujobs.wake.transport_postgres import ConnectFactory

__all__ = ["InstalledOutbox", "install_outbox"]


@dataclass
class InstalledOutbox:
    """What ``install_outbox`` installed and started; ``stop()`` undoes all of it."""

    driver: JobDriver
    store: PostgresOutboxStore
    facade: OutboxJobsFacade
    wake: ChannelWake | None
    relay: OutboxRelay | None

    async def stop(self) -> None:
        """Join the relay's pass in flight, stop the listener, uninstall the facade and the
        driver. Safe twice."""
        if self.relay is not None:
            await self.relay.stop()
        if self.wake is not None:
            await self.wake.stop()
        set_jobs_facade(None)
        set_job_driver(None)


async def install_outbox(
    pool: asyncpg.Pool[Any],
    *,
    dsn: str | ConnectFactory,
    mode: OutboxMode = "optional",
    driver: JobDriver | None = None,
    relay: bool = True,
) -> InstalledOutbox:
    """Make every ``handle.enqueue()`` inside ``transaction(conn)`` stage on ``conn``, and
    publish what commits.

    ``pool`` is the app's asyncpg pool (the outbox table and, by default, the queue live
    there); ``dsn`` dials the listener's own connection (a pooled one cannot LISTEN).
    ``mode="required"`` refuses an enqueue outside a transaction (``X_OUTBOX_NO_TX``).
    ``driver`` is where the relay publishes (default: ``announcing(postgres_driver(pool))``,
    so this process's workers start a publish at once). ``relay=False`` installs the facade
    only, for a process whose outbox another process (``ujobs relay``) relays.
    """
    target = driver if driver is not None else announcing(postgres_driver(pool))
    store = postgres_outbox_store(executor=pool)
    facade = outbox_jobs_facade(store=store, driver=target, mode=mode)
    wake: ChannelWake | None = None
    started: OutboxRelay | None = None
    if relay:
        wake = postgres_wake(dsn, pool, channels=(OUTBOX_WAKE_CHANNEL,))
        await wake.start()
        started = outbox_relay(store=store, driver=target, wake=wake)
        try:
            await started.start()
        except BaseException:
            await wake.stop()
            raise
    set_job_driver(target)
    set_jobs_facade(facade)
    return InstalledOutbox(driver=target, store=store, facade=facade, wake=wake, relay=started)
