"""Shared pieces of the outbox tests: two jobs an app stages in one transaction, the wiring of
the three steps, and reads of ``x_outbox`` / ``x_jobs`` straight from the database."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import asyncpg

from ujobs.drivers.postgres.driver import PostgresDriver, postgres_driver
from ujobs.execution.run import Run
from ujobs.jobs.enqueue_target import set_jobs_facade
from ujobs.jobs.job import JobHandle, job
from ujobs.jobs.schema import t
from ujobs.lifecycle import Lifecycle
from ujobs.outbox import (
    OutboxRelay,
    PostgresOutboxStore,
    RelayOptions,
    outbox_jobs_facade,
    outbox_relay,
    postgres_outbox_store,
)

if TYPE_CHECKING:
    Pool = asyncpg.Pool[Any]
else:
    Pool = asyncpg.Pool


@dataclass
class Billing:
    create_invoice: JobHandle[Any]
    charge_card: JobHandle[Any]
    ran: list[tuple[str, str]]


def billing_jobs() -> Billing:
    """``create_invoice`` then ``charge_card``: the charge must never run first."""
    ran: list[tuple[str, str]] = []

    @job(
        input=t.object(order=t.string),
        idempotency_key=lambda i: f"invoice:{i.order}",
        tenant="none",
    )
    async def create_invoice(run: Run[Any]) -> None:
        ran.append(("create_invoice", run.input.order))

    @job(
        input=t.object(order=t.string),
        idempotency_key=lambda i: f"charge:{i.order}",
        tenant="none",
    )
    async def charge_card(run: Run[Any]) -> None:
        ran.append(("charge_card", run.input.order))

    return Billing(create_invoice, charge_card, ran)


@dataclass
class Wired:
    driver: PostgresDriver
    store: PostgresOutboxStore


def wire(pool: Pool, *, mode: Any = "optional") -> Wired:
    """Steps 1 and 2 of "not on by default": the table (migrated) and the facade."""
    driver = postgres_driver(pool)
    store = postgres_outbox_store(executor=pool)
    set_jobs_facade(outbox_jobs_facade(store=store, driver=driver, mode=mode))
    return Wired(driver, store)


def relay_for(wired: Wired, **given: Any) -> OutboxRelay:
    """Step 3, on a lifecycle of its own so no test touches the process's; ``given`` mixes the
    factory's arguments and ``RelayOptions`` fields."""
    given.setdefault("lifecycle", Lifecycle())
    return outbox_relay(store=wired.store, driver=wired.driver, **split_options(given))


def split_options(given: dict[str, Any]) -> dict[str, Any]:
    """The factory's arguments, with the ``RelayOptions`` fields among them gathered into
    ``options=``."""
    fields = {f.name for f in dataclasses.fields(RelayOptions)}
    options = {k: v for k, v in given.items() if k in fields}
    rest = {k: v for k, v in given.items() if k not in fields}
    return {**rest, "options": RelayOptions(**options)}


async def outbox_rows(pool: Pool) -> list[asyncpg.Record]:
    return await pool.fetch(
        "select id, run_id, name, claimed_by, x_ms(claimed_at) as claimed_at_ms,"
        " x_ms(published_at) as published_at_ms from x_outbox order by staged_at, id"
    )


async def job_rows(pool: Pool) -> list[asyncpg.Record]:
    return await pool.fetch(
        "select id, run_id, name, state, input::text as input from x_jobs order by seq"
    )
