"""bench/recovery.py in a small, bounded form: a PRIVATE Postgres (initdb into a temporary
directory, a free port) restarted under real ``ujobs worker`` processes — every row the workers
held at the restart is settled or claimed anew, and every job completes; and a private
redis-server with an append-only file, restarted, keeps every job enqueued before."""

from __future__ import annotations

import asyncio
import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from tests.support.restartable import PrivatePostgres, postgres_bin_dir

BENCH = Path(__file__).resolve().parents[2] / "bench"


def recovery() -> ModuleType:
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    return importlib.import_module("recovery")


@pytest.fixture
def private_pg() -> Iterator[PrivatePostgres]:
    try:
        postgres_bin_dir()
    except RuntimeError as exc:
        pytest.skip(str(exc))
    with PrivatePostgres(settings={"fsync": "off"}) as pg:
        yield pg


async def test_every_held_row_settles_after_a_postgres_restart(private_pg: PrivatePostgres) -> None:
    logs = private_pg.workdir / "logs"
    logs.mkdir()
    async with asyncio.timeout(50):
        figures = await recovery().pg_restart_recovery(
            private_pg, logs, jobs=120, workers=2, concurrency=4, body_ms=50, timeout_s=20
        )
    assert figures["pg_restart_held_rows"] > 0  # the restart did catch rows held
    assert figures["pg_restart_recovery_s"] is not None  # every one of them came back
    assert figures["pg_restart_jobs_done"] == 120


async def test_redis_with_an_append_only_file_keeps_every_job_across_a_restart() -> None:
    figures = await recovery().redis_aof_restart(jobs=500)
    assert figures == {"redis_aof_restart_lost": 0}
