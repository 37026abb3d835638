"""A user's app may own packages named ``services``, ``shared``, ``webhooks`` and ``exports``:
ultimate-jobs installs one name, ``ujobs``, so nothing of ours shadows them. The app (its job in
``services/billing.py`` using the other three) runs under a real ``ujobs worker`` and under
``ujobs dev``, started from the app's directory as a user starts them."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from tests.e2e.service_process import ServiceProcess, service_env
from ujobs.drivers.base import EnqueueRequest
from ujobs.drivers.postgres.driver import postgres_driver

pytestmark = pytest.mark.slow

BILLING = """
import sys
from typing import Any

from ujobs import Run, define_api, job, t

from exports.reports import report_name
from shared.money import cents
from webhooks.topics import INVOICE_PAID


@job(
    input=t.object(amount=t.string),
    idempotency_key=lambda i: f"charge:{i.amount}",
    tenant="none",
)
async def charge(run: Run[Any]) -> None:
    def charged(_: object) -> dict[str, Any]:
        return {"cents": cents(run.input.amount), "topic": INVOICE_PAID, "report": report_name()}

    await run.step.run("charged", charged)


api = define_api(jobs=[sys.modules[__name__]])
"""

PACKAGES = {
    "services/__init__.py": "",
    "services/billing.py": BILLING,
    "shared/__init__.py": "",
    "shared/money.py": "def cents(amount: str) -> int:\n    return round(float(amount) * 100)\n",
    "webhooks/__init__.py": "",
    "webhooks/topics.py": 'INVOICE_PAID = "invoice.paid"\n',
    "exports/__init__.py": "",
    "exports/reports.py": 'def report_name() -> str:\n    return "monthly"\n',
}


@pytest.fixture
def app_dir(tmp_path: Path) -> Path:
    for name, text in PACKAGES.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


async def _charged(pool: asyncpg.Pool[Any], amount: str) -> dict[str, Any]:
    driver = postgres_driver(pool)
    queued = await driver.enqueue(
        EnqueueRequest(name="charge", input={"amount": amount}, idempotency_key=f"charge:{amount}")
    )
    async with asyncio.timeout(60):
        while (row := await driver.introspect.get(queued.id)) is None or row.state != "done":
            await asyncio.sleep(0.05)
    [step] = await driver.load_steps(queued.run_id, tenant_id=None)
    assert isinstance(step.output, dict)
    return step.output


async def test_a_user_app_with_our_folder_names_runs_under_ujobs_worker(
    app_dir: Path, pg_dsn: str, pg_pool: asyncpg.Pool[Any]
) -> None:
    env = service_env(DATABASE_URL=pg_dsn, UJOBS_APP="services.billing:api")
    del env["PYTHONPATH"]  # the user's directory alone, as a user runs it
    worker = await ServiceProcess.start("worker", env=env, cwd=app_dir)
    try:
        await worker.log_event("ujobs.service.started")
        output = await _charged(pg_pool, "12.34")
        worker.terminate()
        code = await worker.exit_code(15)
    finally:
        await worker.kill()
    assert code == 0
    assert output == {"cents": 1234, "topic": "invoice.paid", "report": "monthly"}


async def test_a_user_app_with_our_folder_names_runs_under_ujobs_dev(
    app_dir: Path, pg_dsn: str, pg_pool: asyncpg.Pool[Any]
) -> None:
    env = service_env(DATABASE_URL=pg_dsn, UJOBS_APP="services.billing:api", UJOBS_API_PORT="0")
    del env["PYTHONPATH"]
    dev = await ServiceProcess.start("dev", env=env, cwd=app_dir)
    try:
        async with asyncio.timeout(60):
            while not any("worker: queues" in line for line in dev.out):
                if dev.proc.returncode is not None:
                    raise AssertionError(f"ujobs dev exited: {dev.out} {dev.logs}")
                dev.changed.clear()
                await dev.changed.wait()
        output = await _charged(pg_pool, "5")
        dev.terminate()
        code = await dev.exit_code(15)
    finally:
        await dev.kill()
    assert code == 0
    assert output == {"cents": 500, "topic": "invoice.paid", "report": "monthly"}
