"""The exports guide's declaration, pasted into a user's ``app/reports.py`` as the guide shows
it, run by a real ``ujobs exporter`` started from that folder: a ``keyset()`` without ``pool=``
reads the queue's own database through the exporter's pool, and the file holds the export's
tenant's rows only."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from tests.e2e.service_process import ServiceProcess, service_env
from tests.exports.kit import files
from tests.support.docs import first_block, module_of, page
from tests.support.scratch import scratch_table
from ujobs.drivers.postgres import postgres_driver
from ujobs.exports.manifest import Manifest

pytestmark = pytest.mark.slow


async def test_the_guides_export_runs_as_pasted_under_ujobs_exporter(
    pg_dsn: str, pg_pool: asyncpg.Pool[Any], tmp_path: Path
) -> None:
    code = first_block(page("guides/exports.md"), "python")
    assert code.splitlines()[0] == "# app/reports.py"
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "reports.py").write_text(code)
    orders = (
        "create table orders (id bigint primary key, org_id text not null, "
        "placed_at timestamptz not null, total numeric not null)"
    )
    async with scratch_table(pg_pool, "orders", orders):
        await export_org_1(code, pg_dsn, pg_pool, tmp_path)


async def export_org_1(code: str, pg_dsn: str, pg_pool: asyncpg.Pool[Any], tmp_path: Path) -> None:
    await pg_pool.execute(
        "insert into orders select i, case when i % 3 = 0 then 'org-2' else 'org-1' end, "
        "timestamptz '2026-01-02 03:04:05+00' + i * interval '1 minute', i * 1.5 "
        "from generate_series(1, 30) i"
    )
    export_orders = module_of(code, "docs_reports_app").export_orders
    driver = postgres_driver(pg_pool)
    queued = await driver.enqueue(
        export_orders.request({"org_id": "org-1", "export_id": "e1"}, clock=driver.clock)
    )
    store = tmp_path / "store"
    env = service_env(DATABASE_URL=pg_dsn, UJOBS_APP="app.reports:api", UJOBS_EXPORT_URL=str(store))
    exporter = await ServiceProcess.start("exporter", env=env, cwd=tmp_path)
    try:
        async with asyncio.timeout(60):
            while (row := await driver.introspect.get(queued.id)) is None or row.state != "done":
                assert row is None or row.state != "dead", row.last_error
                await asyncio.sleep(0.1)
        exporter.terminate()
        assert await exporter.exit_code(30) == 0
    finally:
        await exporter.kill()
    assert row.attempt == 1, row.last_error
    found = files(store)
    manifest = Manifest.decode(found["exports/org-1/e1/manifest.json"])
    artifact = b"".join(found[key] for key in manifest.part_keys())
    expected = await pg_pool.fetch(
        "select id, to_char(placed_at at time zone 'UTC', 'YYYY-MM-DD HH24:MI:SS') as at, "
        "total from orders where org_id = 'org-1' order by id"
    )
    lines = ["id,placed_at,total"] + [f"{r['id']},{r['at']}+00,{r['total']}" for r in expected]
    assert artifact.decode() == "\n".join(lines) + "\n"
    assert manifest.rows == 20
