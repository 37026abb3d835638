"""The jobs page's results example, run as pasted: its program enqueues and waits while a real
``ujobs worker`` (its ``app.maths:api``) runs the job, and prints the stored result twice."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from tests.e2e.service_process import ROOT, ServiceProcess, service_env
from tests.support.docs import blocks, marked_block, page, section


async def test_the_results_example_runs_as_pasted(pg_dsn: str, tmp_path: Path) -> None:
    text = section(page("concepts/jobs.md"), "Results")
    program = marked_block(text, "results-example")
    (app,) = [b for b in blocks(text, "python") if b.startswith("# app/maths.py")]
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "__init__.py").write_text("")
    (tmp_path / "app" / "maths.py").write_text(app)
    (tmp_path / "main.py").write_text(program)
    env = service_env(DATABASE_URL=pg_dsn, UJOBS_APP="app.maths:api")
    env["PYTHONPATH"] = f"{tmp_path}:{ROOT}"
    worker = await ServiceProcess.start("worker", env=env, cwd=tmp_path)
    try:
        await worker.log_event("ujobs.service.started", timeout_s=60)
        run = await asyncio.create_subprocess_exec(
            sys.executable,
            "main.py",
            cwd=tmp_path,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        output, errors = await asyncio.wait_for(run.communicate(), 120)
    finally:
        await worker.kill()
    assert run.returncode == 0, output.decode() + errors.decode()
    assert output.decode().splitlines() == ["{'sum': 5}", "{'sum': 5}"]
