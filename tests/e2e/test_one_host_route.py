"""The deployment guide's "Without Docker, on one host" block, run as pasted (its ports moved to
free ones, its database and app to the test's): every service starts beside the others, each
with its own UJOBS_METRICS_PORT, and answers /readyz; a second worker on a port already taken
stops at start with X_CONFIG_INVALID naming the variable."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.e2e.service_process import ROOT, service_env
from tests.support.docs import blocks, page

pytestmark = pytest.mark.slow

WAIT_S = 120.0
SERVICES = {"worker", "relay", "scheduler", "webhook-deliverer", "exporter"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def _block() -> str:
    [block] = [b for b in blocks(page("guides/deployment.md"), "sh") if "ujobs relay" in b]
    return block


def _ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as answer:
            return bool(answer.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def test_the_guides_block_gives_every_service_its_own_metrics_port() -> None:
    block = _block()
    pattern = r"^UJOBS_METRICS_PORT=(\d+) ujobs ([a-z-]+) &$"
    ports = {name: port for port, name in re.findall(pattern, block, re.M)}
    assert set(ports) == SERVICES
    assert len(set(ports.values())) == len(ports)


def test_the_one_host_route_runs_and_a_busy_port_stops_a_service_at_start(
    pg_dsn: str, tmp_path: Path
) -> None:
    block = _block()
    ports: dict[str, int] = {}

    def moved(match: re.Match[str]) -> str:
        port = _free_port()
        ports[match[2]] = port
        return f"UJOBS_METRICS_PORT={port} ujobs {match[2]} &"

    script = re.sub(r"^UJOBS_METRICS_PORT=(\d+) ujobs ([a-z-]+) &$", moved, block, flags=re.M)
    script = script.replace("UJOBS_API_PORT=8080", f"UJOBS_API_PORT={_free_port()}")
    script = re.sub(r"DATABASE_URL=\S+", f"DATABASE_URL={pg_dsn}", script)
    script = script.replace("UJOBS_APP=myapp.jobs:api", "UJOBS_APP=ujobs.services.example_app:api")
    assert set(ports) == SERVICES
    (tmp_path / "route.sh").write_text("set -e\n" + script)
    env = service_env()
    del env["UJOBS_METRICS_PORT"]  # the block's own, not the test harness's
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    log = (tmp_path / "route.log").open("w")
    proc = subprocess.Popen(
        ["bash", "route.sh"], cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + WAIT_S
        waiting = set(ports)
        while waiting and time.monotonic() < deadline and proc.poll() is None:
            waiting = {name for name in waiting if not _ready(ports[name])}
            time.sleep(0.2)
        assert not waiting, (waiting, (tmp_path / "route.log").read_text()[-4000:])
        # A second worker on the first worker's port: a clear refusal at start, exit 1.
        second = subprocess.run(
            [sys.executable, "-m", "ujobs.services.cli", "worker", "--json"],
            cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
            env={**env, "DATABASE_URL": pg_dsn, "UJOBS_APP": "ujobs.services.example_app:api",
                 "UJOBS_METRICS_PORT": str(ports["worker"])},
        )  # fmt: skip
        assert second.returncode != 0
        assert "X_CONFIG_INVALID" in second.stdout + second.stderr
        assert "UJOBS_METRICS_PORT" in second.stdout + second.stderr
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
