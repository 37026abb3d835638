"""``orders_export``: ``rows`` numbered rows in pages of 10, to the default sink.

``slow_ms`` waits before each page, so a process test can kill the exporter mid-export. The
job ``plain_job`` is not an export (the download routes refuse its id). ``app_orders_export``
is a tenant's export of ``app_orders`` (every tenant's rows in one table, in the app's database
at ``DATABASE_URL``) through ``keyset(tenant_column=...)``: no ``where``, the library keeps
the other tenants' rows out.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from typing import Any

import asyncpg

from ujobs import Run, job, t
from ujobs.exports import export_rows, iterate, keyset
from ujobs.exports.sources import IteratorSource


def numbered(run: Run[Any]) -> IteratorSource[dict[str, Any]]:
    total = int(run.input.rows)
    slow_s = int(run.input.slow_ms) / 1000

    async def rows(start: int) -> AsyncIterator[dict[str, Any]]:
        for i in range(start, total):
            if slow_s and i % 10 == 0:
                await asyncio.sleep(slow_s)
            yield {"id": i, "name": f"row {i}", "note": "=1+1" if i % 7 == 1 else f"n{i}"}

    return iterate(rows)


orders_export = export_rows(
    name="orders.export",
    input=t.object(
        org_id=t.string, export_id=t.string, rows=t.number.int(), slow_ms=t.number.int()
    ),
    tenant=lambda i: i.org_id,
    prefix=lambda i: f"exports/{i.org_id}/{i.export_id}",
    source=numbered,
    columns=["id", "name", "note"],
    batch=10,
)


class AppDatabase:
    """The app's database (``DATABASE_URL``) as ``keyset()`` takes it (``acquire()``), opened
    on first use in the process that runs the export."""

    def __init__(self) -> None:
        self._pool: asyncpg.Pool[Any] | None = None

    @contextlib.asynccontextmanager
    async def acquire(self) -> AsyncIterator[Any]:
        if self._pool is None:
            self._pool = await asyncpg.create_pool(
                os.environ["DATABASE_URL"], min_size=1, max_size=3
            )
        async with self._pool.acquire() as conn:
            yield conn


APP_DATABASE = AppDatabase()
APP_ORDERS_COLUMNS = ["id", "org_id", "label"]


def app_orders(copy: bool | None) -> Any:
    """``app_orders`` as a tenant's export reads it: no ``where``, the library keeps the
    other tenants' rows out."""

    def source(run: Run[Any]) -> Any:
        return keyset(
            "app_orders",
            key="id",
            columns=APP_ORDERS_COLUMNS,
            tenant_column="org_id",
            pool=APP_DATABASE,
            copy=copy,
        )

    return source


def _app_orders_export(name: str, copy: bool | None) -> Any:
    return export_rows(
        name=name,
        input=t.object(org_id=t.string, export_id=t.string),
        tenant=lambda i: i.org_id,
        prefix=lambda i: f"exports/{i.org_id}/{name}/{i.export_id}",
        source=app_orders(copy),
        columns=APP_ORDERS_COLUMNS,
        batch=3,
    )


app_orders_export = _app_orders_export("app_orders.export", None)  # Postgres writes the CSV
app_orders_rows = _app_orders_export("app_orders.rows", False)  # rows decoded and encoded


@job(name="plain.job", idempotency_key=lambda i: "plain", tenant="none")
async def plain_job(run: Run[Any]) -> None:
    return None


@job(
    name="org.job",
    input=t.object(org_id=t.string),
    idempotency_key="org",
    tenant=lambda i: i.org_id,
)
async def org_job(run: Run[Any]) -> None:
    """A tenant's job that is not an export (the download routes answer its id as unknown to
    another tenant, never "not an export")."""


def expected_csv(rows: int) -> bytes:
    """The artifact ``orders_export`` writes for ``rows`` rows."""
    lines = ["id,name,note"]
    for i in range(rows):
        note = "'=1+1" if i % 7 == 1 else f"n{i}"
        lines.append(f"{i},row {i},{note}")
    return ("\n".join(lines) + "\n").encode()
