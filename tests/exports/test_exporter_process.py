"""``ujobs exporter`` as real processes: one killed with SIGKILL mid-export, another takes the
job over when its lease lapses and resumes at the page the first had not finished — the
artifact is byte-identical to an uninterrupted one, and no finished part is written again."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from tests.e2e.service_process import ServiceProcess, service_env
from tests.exports.export_app.jobs import expected_csv, orders_export
from tests.exports.kit import files
from ujobs.drivers.base import EnqueueRequest
from ujobs.drivers.postgres import PostgresDriver, postgres_driver
from ujobs.exports.manifest import Manifest

pytestmark = pytest.mark.slow

ROWS = 200  # 20 pages of 10
PREFIX = "exports/org-1/e1"


async def parts_done(driver: PostgresDriver, request: EnqueueRequest, run_id: str) -> int:
    steps = await driver.load_steps(run_id, tenant_id=request.tenant_id)
    return sum(1 for s in steps if s.name.startswith("part-"))


async def test_a_sigkilled_exporter_resumes_at_its_page_byte_identical(
    pg_dsn: str, pg_pool: asyncpg.Pool[Any], tmp_path: Path
) -> None:
    store = tmp_path / "store"
    env = service_env(
        DATABASE_URL=pg_dsn,
        UJOBS_APP="tests.exports.export_app:api",
        UJOBS_EXPORT_URL=str(store),
        UJOBS_VISIBILITY_TIMEOUT_MS="1000",
    )
    driver = postgres_driver(pg_pool)
    request = orders_export.request(
        {"org_id": "org-1", "export_id": "e1", "rows": ROWS, "slow_ms": 150}
    )
    queued = await driver.enqueue(request)
    first = await ServiceProcess.start("exporter", env=env)
    try:
        async with asyncio.timeout(60):
            while await parts_done(driver, request, queued.run_id) < 4:
                await asyncio.sleep(0.05)
        await first.kill()  # SIGKILL: no drain, no settle, the lease is left to lapse
    finally:
        await first.kill()
    killed_at = await parts_done(driver, request, queued.run_id)
    assert killed_at < ROWS // 10
    before = {
        key: (store / key).stat().st_mtime_ns
        for key in files(store)
        if key.endswith(".csv") and int(key[-9:-4]) < killed_at
    }
    assert f"{PREFIX}/manifest.json" not in files(store)

    second = await ServiceProcess.start("exporter", env=env)
    try:
        async with asyncio.timeout(90):
            while (row := await driver.introspect.get(queued.id)) is None or row.state != "done":
                await asyncio.sleep(0.1)
        second.terminate()
        assert await second.exit_code(30) == 0
    finally:
        await second.kill()

    assert row.attempt == 2
    found = files(store)
    manifest = Manifest.decode(found[f"{PREFIX}/manifest.json"])
    assert (manifest.parts, manifest.rows) == (ROWS // 10, ROWS)
    artifact = b"".join(found[key] for key in manifest.part_keys())
    assert artifact == expected_csv(ROWS)
    assert manifest.bytes == len(artifact)
    # The pages finished before the kill were replayed from their steps, not written again.
    assert {key: (store / key).stat().st_mtime_ns for key in before} == before
    assert not [key for key in found if not key.startswith(PREFIX)]
