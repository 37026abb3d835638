"""The README and the documentation site stay true: the two commands on top of the README, every
variable documented, the scaler's statement the one the driver runs, and each page's programs
run as pasted from the page they are on (tests/support/docs.py reads them)."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from tests.support.docs import blocks, first_block, marked_block, module_of, page, pages
from ujobs.drivers.postgres.sql import query
from ujobs.jobs.enqueue_target import reset_job_driver
from ujobs.services.config.variables import VARIABLES

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_two_commands_come_first() -> None:
    marked = re.findall(r"<!-- (\w[\w-]*) -->\n```\n(.*?)\n```", README, flags=re.S)
    assert marked[:2] == [
        (
            "install-command",
            "python3 -m venv .venv && .venv/bin/pip install -e '.[dev]' && "
            ".venv/bin/ujobs dev --example",
        ),
        ("test-command", ".venv/bin/python -m pytest -q"),
    ]
    assert README.index("<!-- test-command -->") < README.index("\n## ")


def test_every_variable_is_in_the_configuration_table() -> None:
    documented = re.findall(r"^\| `([A-Z_]+)` \|", page("reference/configuration.md"), flags=re.M)
    assert sorted(documented) == sorted(VARIABLES)


def test_the_scaler_query_is_the_drivers_with_the_queues_inlined() -> None:
    shown = first_block(page("guides/operations.md"), "sql")
    statement = "\n".join(
        line for line in query("scaler_depth").splitlines() if not line.startswith("--")
    )
    assert shown.strip() == statement.replace("$1::text[]", "'{banks,banks-long}'::text[]").strip()


async def test_the_scheduler_wiring_shown_runs(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The section's program, run as written against a real database (its ``main``; where the
    app would run, until this scheduler leads): it starts a scheduler that leads, and stops
    it, releasing the lease."""
    code = first_block(page("concepts/scheduler.md"), "python")
    assert code.rstrip().endswith("asyncio.run(main())")
    app_runs = "await asyncio.Event().wait()"
    assert app_runs in code
    running = code.replace(
        app_runs, "SEEN.append(scheduler); await scheduler.signals.wait('leader', timeout_s=10)"
    ).replace("asyncio.run(main())", "")
    monkeypatch.setenv("DATABASE_URL", pg_dsn)
    seen: list[Any] = []
    namespace: dict[str, Any] = {"SEEN": seen}
    exec(running, namespace)
    try:
        await namespace["main"]()
        (scheduler,) = seen
        assert scheduler.state.durable
        assert scheduler.signals.emitted("leader") == [True]
        assert scheduler.phase == "stopped"
        conn = await asyncpg.connect(pg_dsn)
        try:
            assert await conn.fetchval("select count(*) from x_job_leases") == 0  # released
        finally:
            await conn.close()
    finally:
        reset_job_driver()


def test_no_snippet_awaits_at_the_top_level() -> None:
    """Every Python snippet, on every page and in the README, runs as pasted: an ``await`` only
    inside an ``async def``."""
    every = [(name, code) for name, text in pages().items() for code in blocks(text, "python")]
    assert len(every) >= 13  # the twelve the README had, now on their pages, and its own
    for name, code in every:
        assert not re.search(r"^(\w+ = )?await ", code, flags=re.M), f"{name}:\n{code}"


async def test_the_workflows_example_fans_out_and_in_as_pasted(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The workflows guide's program, run as written (its ``main``): three children, one
    gather, the parent's result read through its handle."""
    code = marked_block(page("guides/workflows.md"), "workflows-example")
    module = module_of(code, "workflows_example")
    await module.main()
    assert capsys.readouterr().out.strip() == "{'total': 126, 'charged': 3}"


def test_the_testing_example_passes_as_a_users_test(tmp_path: Path) -> None:
    """The testing guide's example test, written to a user's project and run by pytest there."""
    code = marked_block(page("guides/testing.md"), "testing-example")
    (tmp_path / "test_trials.py").write_text(code)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_trials.py"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout


async def test_the_outbox_example_runs_as_pasted(pg_dsn: str, tmp_path: Path) -> None:
    """The section's program, run as written against a real database, with the app module it
    imports beside it: the order's row and its two staged jobs committed together."""
    code = first_block(page("concepts/outbox.md"), "python")
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "__init__.py").write_text("")
    (tmp_path / "app" / "billing.py").write_text(BILLING_APP)
    (tmp_path / "main.py").write_text(code)
    conn = await asyncpg.connect(pg_dsn)
    try:
        await conn.execute("create table invoices (id text primary key)")
        program = await asyncio.create_subprocess_exec(
            sys.executable,
            "main.py",
            cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": f"{tmp_path}:{ROOT}", "DATABASE_URL": pg_dsn},
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        output, _ = await asyncio.wait_for(program.communicate(), 120)
        assert program.returncode == 0, output.decode()
        assert await conn.fetchval("select count(*) from invoices") == 1
        assert await conn.fetchval("select count(*) from x_outbox") == 2
    finally:
        await conn.close()


BILLING_APP = """
from ujobs import Run, job, t

@job(input=t.object(order_id=t.string), idempotency_key=lambda i: f"inv:{i.order_id}",
     tenant="none")
async def create_invoice(run: Run) -> None:
    return None

@job(input=t.object(order_id=t.string), idempotency_key=lambda i: f"chg:{i.order_id}",
     tenant="none")
async def charge_card(run: Run) -> None:
    return None
"""


def test_the_readme_example_is_the_tours_and_declares_its_job(tmp_path: Path) -> None:
    """The README's twenty lines are the tour's ``app/jobs.py``, and importing them as a user's
    module registers ``onboard_org`` with the key and tenant they declare."""
    (example,) = blocks(README, "python")
    assert example in blocks(page("getting-started.md"), "python")
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "__init__.py").write_text("")
    (tmp_path / "app" / "jobs.py").write_text(example)
    probe = (
        "from app.jobs import api\n"
        "job = api.registry().jobs['onboard_org']\n"
        "value = job.parse_input({'org_id': 'acme'})\n"
        "print(sorted(api.registry().jobs), job.tenant_for(value))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": f"{tmp_path}:{ROOT}"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["['onboard_org']", "acme"]
