"""The README's first-run promise: ``ujobs dev --example`` on a machine with no Postgres, Redis
or NATS configured (no DATABASE_URL / REDIS_URL, HOME and cwd empty temp dirs) starts an
embedded Postgres, and within a minute shows a step replay, a sleep resume, a task fire and
the example job done, its failed first attempt told as a scheduled retry and no traceback on
the terminal (they are in ./.ujobs/dev.log); SIGTERM then drains it, says so, exits 0, and the
embedded server is stopped."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow

WANTED = {
    "replay": "'provision' replayed from storage",
    "resume": "nudge: woke up after",
    "done": "onboard_org",  # with ": done after" on the same line
    "fire": "task poll_fleet: fired for",
    "fan-out": "poll_hosts: fanned out 3 poll_host jobs",
}


async def test_ujobs_dev_example_on_a_bare_machine(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "PYTHONPATH": str(ROOT),
        "LANG": "C.UTF-8",
        "UJOBS_API_PORT": "0",  # a free port: 8080 may be taken on this machine
    }
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "ujobs.services.cli", "dev", "--example",
        cwd=work, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    seen: dict[str, str] = {}
    lines: list[str] = []
    assert proc.stdout is not None
    assert proc.stderr is not None
    try:
        async with asyncio.timeout(90):
            while len(seen) < len(WANTED):
                raw = await proc.stdout.readline()
                if not raw:
                    early = (await proc.stderr.read()).decode()
                    raise AssertionError("ujobs dev ended early:\n" + "".join(lines) + early)
                line = raw.decode()
                lines.append(line)
                for key, text in WANTED.items():
                    if text in line and (key != "done" or ": done after" in line):
                        seen.setdefault(key, line)
        proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(60):
            rest, err_bytes = await proc.communicate()
            code = proc.returncode
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    err = err_bytes.decode()
    assert code == 0, err
    lines += rest.decode().splitlines(keepends=True)
    story = "".join(lines)
    # The story: the failed first attempt is a scheduled retry, never "enqueued" again …
    onboard = [line for line in lines if line.startswith("onboard_org ")]
    failed = [i for i, line in enumerate(onboard) if "failed, retry scheduled for" in line]
    assert failed, onboard
    assert not any(": enqueued on" in line for line in onboard[failed[0] :])
    # … no traceback reaches the terminal (it is in the JSON log file) …
    assert "Traceback" not in story
    assert "Traceback" not in err
    log = (work / ".ujobs" / "dev.log").read_text(encoding="utf-8")
    assert '"event":"jobs.attempt.failed"' in log
    assert "Traceback (most recent call last)" in log
    # … and the end is said out loud.
    assert "ujobs dev: stopping: no new work; draining what is running" in story
    assert lines[-1].startswith("ujobs dev: drained and stopped")
    assert "no DATABASE_URL: starting an embedded Postgres in ./.ujobs/pg" in lines[0]
    # The replay came before the resume, and the job finished after both.
    order = [lines.index(seen[k]) for k in ("replay", "resume", "done")]
    assert order == sorted(order)
    data = work / ".ujobs" / "pg"
    assert (data / "PG_VERSION").exists()
    assert not (data / "postmaster.pid").exists()  # the embedded server stopped with us
