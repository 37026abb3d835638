"""Running adapters through the peers' harness, shared by ``bench/latency.py`` and
``bench/throughput.py``.

The harness is ``shared/bench/peers/common.py`` (found through ``UJOBS_PEERS_DIR``, else the
first of ``../shared/bench/peers`` and ``../../shared/bench/peers`` from the project root). Each
adapter — ours, ``bench/bench_ujobs.py``, or a peer's ``bench_<peer>.py`` in that folder, each
peer in its own venv under ``$PEERS_HOME/.venvs/<peer>`` — runs as ONE subprocess and prints
one JSON line; ``run_harness`` answers that line parsed, or ``{"errors": [...]}``. An adapter
may add figures of its own (``bench_ujobs.py``'s history setup time) as ``bench-note <JSON>``
lines on its stderr: they come back under ``bench_notes``.

The bench lock: ``run_harness(..., lock=True)`` holds ``/tmp/ujobs-bench.lock`` (``flock``) for
the duration of that one subprocess only, so several benches on the shared machine take turns
run by run instead of skewing each other's figures, and a short run of somebody else's slips in
between two of ours. A command that takes the lock itself must NOT be wrapped in
``flock /tmp/ujobs-bench.lock``: the wrapper holds the lock on another open file and every run
would wait for it forever.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
ADAPTER = HERE / "bench_ujobs.py"
PEERS_HOME = Path(os.environ.get("PEERS_HOME", "/tmp/ujobs-peers"))
NOTE_PREFIX = "bench-note "  # an adapter's stderr line: this prefix, then a JSON object
LOCK_PATH = Path(os.environ.get("UJOBS_BENCH_LOCK", "/tmp/ujobs-bench.lock"))


def peers_dir() -> Path:
    """The shared peers folder holding ``common.py`` and the peers' adapters."""
    given = os.environ.get("UJOBS_PEERS_DIR")
    candidates = [Path(given)] if given else []
    candidates += [ROOT.parent / "shared/bench/peers", ROOT.parent.parent / "shared/bench/peers"]
    for candidate in candidates:
        if (candidate / "common.py").is_file():
            return candidate.resolve()
    raise SystemExit("cannot find shared/bench/peers; set UJOBS_PEERS_DIR")


def wanted_peers(default: tuple[str, ...]) -> list[str]:
    """``BENCH_PEERS`` (space-separated; empty: none), else ``default``."""
    named = os.environ.get("BENCH_PEERS")
    return named.split() if named is not None else list(default)


def peer_python(peer: str) -> Path:
    return PEERS_HOME / ".venvs" / peer / "bin/python"


def ensure_venvs(peers: list[str]) -> None:
    """Build the venvs of the peers that have none (``setup_venvs.sh`` skips existing ones)."""
    missing = [p for p in peers if not peer_python(p).exists()]
    if not missing:
        return
    env = {**os.environ, "PEERS_HOME": str(PEERS_HOME)}
    if "PY312" not in env:
        # oban needs Python >= 3.12; a pyenv shim for an inactive version would win over
        # setup_venvs.sh's own fallback, so name the interpreter when one is installed.
        found = sorted(Path.home().glob(".pyenv/versions/3.12*/bin/python"))
        if found:
            env["PY312"] = str(found[-1])
    subprocess.run(
        ["bash", str(peers_dir() / "setup_venvs.sh")],
        env=env,
        stdout=sys.stderr,
        check=False,
        timeout=1_800,
    )


def harness_env(tag: str, settings: dict[str, str]) -> dict[str, str]:
    """This process's environment plus the harness's settings for one run."""
    peers = peers_dir()
    env = dict(os.environ)
    env.update(
        {
            "BENCH_TAG": tag,
            "PEERS_HOME": str(PEERS_HOME),
            "UJOBS_PEERS_DIR": str(peers),
            "PYTHONPATH": str(peers),
        }
    )
    env.update(settings)
    return env


def ours_argv() -> list[str]:
    return [sys.executable, str(ADAPTER)]


def peer_argv(peer: str) -> list[str]:
    return [str(peer_python(peer)), f"bench_{peer}.py"]


@contextmanager
def bench_lock(path: Path = LOCK_PATH) -> Iterator[None]:
    """Hold the bench lock; say so on stderr when another bench holds it first."""
    with path.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"  (waiting for {path}: another bench is running)", file=sys.stderr, flush=True)
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def run_harness(
    argv: list[str], env: dict[str, str], timeout_s: float, *, lock: bool = False
) -> dict[str, Any]:
    """One adapter through the harness (cwd: the peers folder): its last JSON line, parsed.

    ``lock``: hold the bench lock for this run only. Give the harness a budget
    (``BENCH_BUDGET_S``) below ``timeout_s``: the harness then ends its run itself and stops its
    worker; killing the harness at the timeout would leave that worker, which runs in a process
    group of its own, behind.
    """
    if lock:
        with bench_lock():
            return _run(argv, env, timeout_s)
    return _run(argv, env, timeout_s)


def _run(argv: list[str], env: dict[str, str], timeout_s: float) -> dict[str, Any]:
    try:
        done = subprocess.run(
            argv,
            cwd=peers_dir(),
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        return {"errors": [f"no answer within {timeout_s:g} s"]}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        return {"errors": [f"rc={done.returncode}, no JSON; stderr: {done.stderr[-500:]}"]}
    result: dict[str, Any] = json.loads(lines[-1])
    notes = [
        json.loads(line.removeprefix(NOTE_PREFIX))
        for line in done.stderr.splitlines()
        if line.startswith(NOTE_PREFIX)
    ]
    if notes:
        result["bench_notes"] = notes
    return result
