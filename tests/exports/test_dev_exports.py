"""``ujobs dev`` runs exports into ``UJOBS_EXPORT_URL`` like the exporter does, or into
``./.ujobs/exports`` beside its other local state, and its banner says which: a real
``ujobs dev`` process, an export enqueued, the artifact found where the banner said."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from tests.e2e.service_process import ServiceProcess, service_env
from tests.exports.export_app.jobs import expected_csv, orders_export
from tests.exports.kit import files
from ujobs.drivers.postgres import postgres_driver
from ujobs.exports.manifest import Manifest

pytestmark = pytest.mark.slow

ROWS = 25  # three parts of ten


async def banner_line(process: ServiceProcess, start: str) -> str:
    async with asyncio.timeout(60):
        while True:
            for line in process.out:
                if line.startswith(start):
                    return line
            if process.proc.returncode is not None:
                raise AssertionError(f"ujobs dev exited: {process.out} {process.logs}")
            process.changed.clear()
            await process.changed.wait()


@pytest.mark.parametrize("configured", [True, False], ids=["UJOBS_EXPORT_URL", "default"])
async def test_ujobs_dev_writes_exports_where_it_says(
    configured: bool, pg_dsn: str, pg_pool: asyncpg.Pool[Any], tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    store = tmp_path / "store" if configured else work / ".ujobs" / "exports"
    given = {"UJOBS_EXPORT_URL": str(store)} if configured else {}
    env = service_env(
        DATABASE_URL=pg_dsn,
        UJOBS_APP="tests.exports.export_app:api",
        UJOBS_API_PORT="0",
        **given,
    )
    dev = await ServiceProcess.start("dev", env=env, cwd=work)
    try:
        line = await banner_line(dev, "ujobs dev: exports: ")
        shown = str(store) if configured else "./.ujobs/exports"
        assert line.startswith(f"ujobs dev: exports: {shown} "), line
        driver = postgres_driver(pg_pool)
        queued = await driver.enqueue(
            orders_export.request({"org_id": "o", "export_id": "d1", "rows": ROWS, "slow_ms": 0})
        )
        async with asyncio.timeout(60):
            while (row := await driver.introspect.get(queued.id)) is None or row.state != "done":
                await asyncio.sleep(0.1)
        dev.terminate()
        assert await dev.exit_code(60) == 0, dev.out
    finally:
        await dev.kill()
    found = files(store)
    manifest = Manifest.decode(found["exports/o/d1/manifest.json"])
    assert b"".join(found[key] for key in manifest.part_keys()) == expected_csv(ROWS)
    if configured:
        assert not (work / ".ujobs" / "exports").exists()
