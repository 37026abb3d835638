"""A real ``ujobs api`` process on a free port, for clients from outside Python (schemathesis,
the README's curl / Node / Java / Go snippets): its base URL and an operator admin token."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import asyncpg
import orjson

from tests.e2e.service_process import ROOT, service_env
from ujobs.services.api.tokens import TokenStore

START_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class LiveApi:
    url: str
    token: str
    tenant_token: str
    """A token of the tenant ``live_api`` was given with ``enqueue:*`` and ``read``."""


TENANT = "0b6c3f0e-8f5c-4f43-9d77-4b6a3a1c8e10"


def _mint(dsn: str, tenant_id: str) -> tuple[str, str]:
    async def mint() -> tuple[str, str]:
        pool = await asyncpg.create_pool(dsn, min_size=1, max_size=1)
        assert pool is not None
        try:
            store = TokenStore(pool)
            admin = await store.create(tenant=None, scopes=["admin"], name="live-api")
            tenant = await store.create(tenant=tenant_id, scopes=["enqueue:*", "read"])
            return admin.secret, tenant.secret
        finally:
            await pool.close()

    return asyncio.run(mint())


@contextlib.contextmanager
def live_api(
    dsn: str, app: str = "tests.unit.sample_app:api", tenant: str = TENANT, **env: str
) -> Iterator[LiveApi]:
    """Start ``ujobs api --port 0`` and yield where it listens; SIGTERM and wait afterwards."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "ujobs.services.cli", "api", "--port", "0"],
        cwd=ROOT,
        env=service_env(DATABASE_URL=dsn, UJOBS_APP=app, **env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    address: list[str] = []
    listening = threading.Event()

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            with contextlib.suppress(orjson.JSONDecodeError):
                record = orjson.loads(line)
                if record.get("event") == "ujobs.api.listening":
                    address.append(record["addresses"][0])
                    listening.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not listening.wait(0.1):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"ujobs api did not start: {''.join(lines)[-4000:]}")
        admin, tenant_token = _mint(dsn, tenant)
        yield LiveApi(url=f"http://{address[0]}", token=admin, tenant_token=tenant_token)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        reader.join(timeout=5)
