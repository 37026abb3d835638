"""``keyset()`` applies the run's tenant itself: a source names its tenant column or declares
itself tenant-free (else ``X_EXPORT_TENANCY_UNDECLARED``), the tenant travels as a bound
parameter on both roads, and a ``tenant="none"`` export reads one tenant's table only inside
``cross_tenant(reason)``."""

from __future__ import annotations

import csv
import io
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from tests.exports.kit import attempt, enqueue, files, frozen_driver
from ujobs.context import Actor, acting_as, cross_tenant
from ujobs.errors import ExportTenancyUndeclaredError, TenancyActorOrgRequiredError
from ujobs.exports.family import export_rows
from ujobs.exports.keyset import keyset
from ujobs.exports.sinks import filesystem_sink
from ujobs.jobs.schema import t

HOSTILE = "org-1' OR '1'='1"


@pytest.fixture
async def orders(pg_pool: asyncpg.Pool[Any]) -> AsyncIterator[str]:
    """``orders`` in a schema of this test's own: ids 1 to 9, every third of org-2, the rest
    org-1's."""
    schema = f"ten_{uuid.uuid4().hex[:10]}"
    async with pg_pool.acquire() as conn:
        await conn.execute(f'CREATE SCHEMA "{schema}"')
        await conn.execute(
            f'CREATE TABLE "{schema}".orders (id bigint PRIMARY KEY, org_id text NOT NULL, '
            "note text NOT NULL)"
        )
        await conn.executemany(
            f'INSERT INTO "{schema}".orders VALUES ($1, $2, $3)',
            [(i, "org-2" if i % 3 == 0 else "org-1", f"n{i}") for i in range(1, 10)],
        )
    try:
        yield f"{schema}.orders"
    finally:
        async with pg_pool.acquire() as conn:
            await conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def test_a_keyset_that_does_not_say_whose_rows_it_reads_is_refused(pg_pool: Any) -> None:
    with pytest.raises(ExportTenancyUndeclaredError) as undeclared:
        keyset("orders", key="id", pool=pg_pool)
    assert undeclared.value.code == "X_EXPORT_TENANCY_UNDECLARED"
    assert "tenant_column=" in undeclared.value.message
    assert "tenant_free=True" in undeclared.value.message
    with acting_as(Actor(org_id="org-1")), pytest.raises(ExportTenancyUndeclaredError):
        keyset("orders", key="id", pool=pg_pool, tenant_column="org_id", tenant_free=True)


async def test_the_tenant_is_a_bound_parameter_of_every_statement(
    pg_pool: asyncpg.Pool[Any], orders: str
) -> None:
    with acting_as(Actor(org_id=HOSTILE)):
        source = keyset(
            orders,
            key="id",
            columns=["id", "note"],
            where="note <> $1",
            args=["n1"],
            tenant_column="org_id",
            pool=pg_pool,
        )
    statements = source.statements
    for sql in (statements.first, statements.after, statements.range_first):
        assert '(note <> $1) AND _keyset."org_id" = $2' in sql
        assert "OR '1'='1" not in sql
    assert [r async for r in source.rows(None, 100)] == []
    page = await source.csv_page(None, 100)
    assert (page.rows, page.data) == (0, b"")
    with acting_as(Actor(org_id="org-2")):
        theirs = keyset(orders, key="id", columns=["id"], tenant_column="org_id", pool=pg_pool)
    assert [r["id"] async for r in theirs.rows(None, 100)] == [3, 6, 9]
    assert (await theirs.csv_page(None, 100)).data == b"3\n6\n9\n"


def _export(
    root: Path, source: Callable[[Any], Any], tenant: Any, name: str = "orders.tenancy"
) -> Any:
    return export_rows(
        name=name,
        input=t.object(org_id=t.string),
        tenant=tenant,
        prefix=lambda i: f"exports/{i.org_id}",
        source=source,
        columns=["id", "org_id"],
        sink=lambda: filesystem_sink(root),
        batch=2,
    )


def _ids(found: dict[str, bytes]) -> list[str]:
    whole = b"".join(v for k, v in sorted(found.items()) if k.endswith(".csv")).decode()
    return [row[0] for row in csv.reader(io.StringIO(whole, newline=""))][1:]


@pytest.mark.parametrize("copy", [None, False], ids=["copy-road", "rows-road"])
async def test_a_tenants_export_without_a_where_reads_only_its_tenants_rows(
    pg_pool: asyncpg.Pool[Any], orders: str, tmp_path: Path, copy: bool | None
) -> None:
    handle = _export(
        tmp_path,
        lambda run: keyset(
            orders, key="id", columns=["id", "org_id"], tenant_column="org_id", pool=run.ctx,
            copy=copy,
        ),
        lambda i: i.org_id,
    )  # fmt: skip
    driver = frozen_driver()
    await enqueue(driver, handle, {"org_id": "org-2"})
    done = await attempt(driver, handle, ctx=pg_pool)
    assert done.outcome == "completed", done.error
    assert _ids(files(tmp_path)) == ["3", "6", "9"]


async def test_a_tenant_none_export_over_an_undeclared_keyset_dead_letters_at_once(
    pg_pool: asyncpg.Pool[Any], orders: str, tmp_path: Path
) -> None:
    """The hole: ``tenant="none"`` over ``keyset("orders")`` without a ``where`` wrote every
    tenant's rows. Now nothing is written and the export dead-letters on its first attempt."""
    handle = _export(
        tmp_path,
        lambda run: keyset(orders, key="id", columns=["id", "org_id"], pool=run.ctx),
        "none",
    )
    driver = frozen_driver()
    await enqueue(driver, handle, {"org_id": "org-2"})
    done = await attempt(driver, handle, ctx=pg_pool)
    assert (done.outcome, done.code) == ("dead-lettered", "X_EXPORT_TENANCY_UNDECLARED")
    assert files(tmp_path) == {}


async def test_a_tenant_none_export_reads_a_tenants_table_only_inside_cross_tenant(
    pg_pool: asyncpg.Pool[Any], orders: str, tmp_path: Path
) -> None:
    def scoped(run: Any) -> Any:
        return keyset(
            orders, key="id", columns=["id", "org_id"], tenant_column="org_id", pool=run.ctx
        )

    def spanning(run: Any) -> Any:
        with cross_tenant("finance's nightly export of every org's orders"):
            return scoped(run)

    refused = _export(tmp_path / "refused", scoped, "none")
    driver = frozen_driver()
    await enqueue(driver, refused, {"org_id": "x"})
    done = await attempt(driver, refused, ctx=pg_pool)
    assert done.code == TenancyActorOrgRequiredError.code
    assert files(tmp_path / "refused") == {}

    everyone = _export(tmp_path / "all", spanning, "none", name="orders.every-tenant")
    driver = frozen_driver()
    await enqueue(driver, everyone, {"org_id": "x"})
    done = await attempt(driver, everyone, ctx=pg_pool)
    assert done.outcome == "completed", done.error
    assert _ids(files(tmp_path / "all")) == [str(i) for i in range(1, 10)]
