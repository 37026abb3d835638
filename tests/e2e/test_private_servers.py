"""On a machine with no Postgres, Redis or NATS, the test fixtures start private ones."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.servers import free_port

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_fixtures_fall_back_to_private_servers_when_nothing_answers() -> None:
    closed = [free_port() for _ in range(3)]
    env = {
        **os.environ,
        "TEST_DATABASE_URL": f"postgresql://postgres@127.0.0.1:{closed[0]}/postgres",
        "TEST_REDIS_URL": f"redis://127.0.0.1:{closed[1]}/0",
        "TEST_NATS_URL": f"nats://127.0.0.1:{closed[2]}",
    }
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/support/private_servers_probe.py",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout
