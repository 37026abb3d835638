"""A Go producer (``tests/e2e/go_nats/producer.go``, standard library only) enqueuing through
JetStream against a live ``ujobs api``: each job published twice under one ``Nats-Msg-Id``,
the second copy dropped by the stream, every job enqueued once under its input's tenant.
Skipped only where ``go`` is not installed (``.ci/run`` installs Debian's golang-go)."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from pathlib import Path

import orjson
import pytest

from tests.e2e.live_api import live_api
from tests.e2e.test_nats_node import _cleanup, _drained, _wait_rows
from tests.services.nats_support import unique_prefix
from ujobs.services.nats.names import NatsNames

pytestmark = pytest.mark.slow

PRODUCER = Path(__file__).parent / "go_nats" / "producer.go"
JOBS = 10


@pytest.mark.skipif(shutil.which("go") is None, reason="go is not installed")
def test_a_go_producer_enqueues_through_jetstream(
    pg_dsn: str, nats_url: str, tmp_path: Path
) -> None:
    names = NatsNames(unique_prefix())
    env = {"NATS_URL": nats_url, "UJOBS_NATS_PREFIX": names.prefix}
    try:
        with live_api(pg_dsn, app="ujobs.services.example_app:api", **env) as api:
            done = subprocess.run(
                ["go", "run", str(PRODUCER)],
                cwd=tmp_path,
                env={
                    **os.environ,
                    **env,
                    "UJOBS_TOKEN": api.token,
                    "JOBS": str(JOBS),
                    "GOCACHE": str(tmp_path / "gocache"),
                    "GOPATH": str(tmp_path / "gopath"),
                    "GO111MODULE": "off",
                },
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
            )
            assert done.returncode == 0, done.stderr
            acks = [orjson.loads(line) for line in done.stdout.splitlines()]
            assert [(a["msgId"], a["duplicate"]) for a in acks] == [
                (f"go-{i}", again) for i in range(JOBS) for again in (False, True)
            ]
            asyncio.run(_drained(nats_url, names))
            rows = asyncio.run(_wait_rows(pg_dsn, JOBS))
            assert sorted(r["tenant_id"] for r in rows) == sorted(f"org-{i}" for i in range(JOBS))
    finally:
        asyncio.run(_cleanup(nats_url, names))
