"""Helpers for the CLI tests: invoke ``ujobs`` in-process or as a process, seed rows."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import asyncpg
import orjson
from typer.testing import CliRunner, Result

from ujobs.drivers.base import ClaimOptions, EnqueueRequest, NackOptions
from ujobs.drivers.postgres.driver import PostgresDriver, postgres_driver
from ujobs.services.cli.app import app

ROOT = Path(__file__).resolve().parents[2]
T = TypeVar("T")


def ujobs(*args: str, dsn: str | None = None, env: dict[str, str] | None = None) -> Result:
    """``ujobs *args`` in this process, DATABASE_URL set to ``dsn``."""
    environment = {"DATABASE_URL": dsn or "", "UJOBS_DRIVER": "", "REDIS_URL": ""}
    environment.update(env or {})
    return CliRunner().invoke(app, list(args), env=environment)


def ujobs_process(
    *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """``ujobs *args`` as a real process (exit codes, stderr, no traceback)."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("UJOBS_")}
    environment.pop("DATABASE_URL", None)
    environment.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "ujobs.services.cli", *args],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def json_of(result: Result) -> Any:
    assert result.stdout, result.stderr
    return orjson.loads(result.stdout)


def with_driver(dsn: str, work: Callable[[PostgresDriver], Awaitable[T]]) -> T:
    async def run() -> T:
        pool = await asyncpg.create_pool(dsn, min_size=1, max_size=2)
        assert pool is not None
        try:
            return await work(postgres_driver(pool))
        finally:
            await pool.close()

    return asyncio.run(run())


async def enqueue(
    driver: PostgresDriver, name: str, key: str, *, queue: str = "default", **extra: Any
) -> str:
    request = EnqueueRequest(
        name=name,
        input=extra.pop("input", {"org_id": key, "email": f"{key}@example.com"}),
        idempotency_key=key,
        queue=queue,
        **extra,
    )
    return (await driver.enqueue(request)).id


async def run_to(
    driver: PostgresDriver,
    job_id: str,
    *,
    steps: tuple[str, ...] = (),
    dead: str | None = None,
    result: str | None = None,
) -> None:
    """Claim ``job_id`` (the only due row of its queue), save ``steps``, then ack it (storing
    ``result``, JSON text) — or dead-letter it with ``dead`` as its error."""
    [claimed] = await driver.claim(ClaimOptions(queues=["default"], limit=1, worker_id="w1"))
    assert claimed.id == job_id
    for name in steps:
        await driver.save_step(
            job_id, claimed.ref, claimed.run_id, name, {"secret": f"out-{name}"}, started_at_ms=1
        )
    if dead is None:
        assert await driver.ack(job_id, claimed.ref, duration_ms=5, result=result)
    else:
        assert await driver.nack(job_id, claimed.ref, NackOptions(error=dead, dead_letter=True))
