"""``ujobs db purge [--dry-run] [--json]`` and the built-in ``x.purge`` the services register
(``UJOBS_PURGE_CRON``, ``UJOBS_PURGE=off``)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import asyncpg
import pytest

from tests.support.cli import json_of, ujobs
from ujobs.errors import ConfigInvalidError
from ujobs.jobs.registry import Registry
from ujobs.scheduler.job_scheduler import job_scheduler
from ujobs.services.config.settings import SchedulerConfig, WorkerConfig, read_common
from ujobs.services.runtime.retention import register_purge
from ujobs.services.runtime.service_run import ServiceRun
from ujobs.services.scheduler import start_scheduler

DAY = 86_400_000
NOW = 1_700_000_000_000
NO_LEDGER_ROWS = {"x_webhook_deliveries": 0, "x_webhook_events": 0, "x_settlements": 0}


def seed(dsn: str) -> None:
    """Two done rows past the 14-day window (with a step each), one inside it, and an expired
    event."""

    async def run() -> None:
        conn = await asyncpg.connect(dsn)
        try:
            for job_id, age in (("old-1", 20 * DAY), ("old-2", 15 * DAY), ("young", DAY)):
                await conn.execute(
                    "insert into x_jobs (id, run_id, name, state, input, idempotency_key,"
                    " max_attempts, run_at, created_at, updated_at, finished_at) values"
                    " ($1, $1, 'j', 'done', '{}', $1, 1, now(), now(), now(),"
                    " now() - make_interval(secs => $2::bigint / 1000.0))",
                    job_id,
                    age,
                )
                await conn.execute(
                    "insert into x_job_steps (run_id, tenant_id, name, started_at, finished_at)"
                    " values ($1, '', 's', now(), now())",
                    job_id,
                )
            await conn.execute(
                "insert into x_job_events (id, name, payload, published_at, expires_at)"
                " values ('e', 'e', '{}', now() - interval '8 days', now() - interval '1 day')"
            )
        finally:
            await conn.close()

    asyncio.run(run())


def test_a_dry_run_counts_and_deletes_nothing_then_a_pass_says_what_it_removed(
    pg_dsn: str,
) -> None:
    seed(pg_dsn)
    dry = json_of(ujobs("db", "purge", "--dry-run", "--json", dsn=pg_dsn))
    assert dry["dryRun"] is True
    assert dry["targets"] == {"x_jobs": 2, "x_outbox": 0, "x_job_events": 1, **NO_LEDGER_ROWS}
    again = json_of(ujobs("db", "purge", "--dry-run", "--json", dsn=pg_dsn))
    assert again["targets"] == dry["targets"]  # nothing was deleted

    done = json_of(ujobs("db", "purge", "--json", dsn=pg_dsn))
    assert done["dryRun"] is False
    assert done["targets"] == {"x_jobs": 4, "x_outbox": 0, "x_job_events": 1, **NO_LEDGER_ROWS}
    assert done["detail"] == {"x_jobs": {"jobs": 2, "steps": 2, "leases": 0}}
    assert done["total"] == 5

    table = ujobs("db", "purge", dsn=pg_dsn)
    assert table.exit_code == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["TABLE", "REMOVED", "DETAIL"]
    assert lines[1].split()[:2] == ["x_jobs", "0"]


def test_the_windows_come_from_the_environment(pg_dsn: str) -> None:
    seed(pg_dsn)
    hour = {"UJOBS_PURGE_DONE_RETENTION_MS": "3600000"}
    dry = json_of(ujobs("db", "purge", "--dry-run", "--json", dsn=pg_dsn, env=hour))
    assert dry["targets"]["x_jobs"] == 3  # the row finished a day ago is past an hour too
    month = {"UJOBS_PURGE_DONE_RETENTION_MS": str(30 * DAY)}
    assert json_of(ujobs("db", "purge", "--json", dsn=pg_dsn, env=month))["targets"]["x_jobs"] == 0
    bad = ujobs("db", "purge", "--json", dsn=pg_dsn, env={"UJOBS_PURGE_DEAD_RETENTION_MS": "0"})
    assert bad.exit_code == 1
    assert json_of(bad)["error"]["meta"]["variable"] == "UJOBS_PURGE_DEAD_RETENTION_MS"
    common = read_common({"UJOBS_PURGE_OUTBOX_RETENTION_MS": "60000"}, "worker")
    assert common.retention.outbox_ms == 60_000
    assert common.retention.done_ms == 14 * DAY
    ledgers = read_common(
        {
            "UJOBS_PURGE_WEBHOOKS_RETENTION_MS": str(7 * DAY),
            "UJOBS_PURGE_SETTLEMENTS_RETENTION_MS": "3600000",
        },
        "worker",
    ).retention
    assert (ledgers.webhooks_ms, ledgers.settlements_ms) == (7 * DAY, 3_600_000)
    assert (common.retention.webhooks_ms, common.retention.settlements_ms) == (30 * DAY, DAY)


def test_purge_needs_a_database(pg_dsn: str) -> None:
    result = ujobs("db", "purge", "--json", dsn="")
    assert result.exit_code == 1
    assert json_of(result)["error"]["code"] == "X_DRIVER_UNAVAILABLE"


def test_the_purge_is_on_hourly_by_default_and_configurable() -> None:
    env = {"DATABASE_URL": "postgresql://localhost/x"}
    assert read_common(env, "scheduler").purge_cron == "0 * * * *"
    assert read_common({**env, "UJOBS_PURGE_CRON": "* * * * *"}, "s").purge_cron == "* * * * *"
    assert read_common({**env, "UJOBS_PURGE": "off"}, "s").purge_cron is None
    with pytest.raises(ConfigInvalidError) as bad:
        read_common({**env, "UJOBS_PURGE_CRON": "every hour"}, "s")
    assert bad.value.meta["variable"] == "UJOBS_PURGE_CRON"
    with pytest.raises(ConfigInvalidError) as typo:
        read_common({**env, "UJOBS_PURGE": "of"}, "s")
    assert "did you mean 'off'" in typo.value.message


def test_the_worker_gets_the_job_and_the_scheduler_the_task_unless_it_is_off() -> None:
    env = {"DATABASE_URL": "postgresql://localhost/x"}
    common = WorkerConfig.load(env).common
    worker, scheduler, poolless = Registry(), Registry(), Registry()
    register_purge(worker, common, pool=object(), task=False)  # type: ignore[arg-type]
    register_purge(scheduler, common, pool=None, task=True)
    register_purge(poolless, common, pool=None, task=False)
    assert (set(worker.jobs), set(worker.tasks)) == ({"x.purge"}, set())
    assert (set(scheduler.jobs), set(scheduler.tasks)) == ({"x.purge"}, {"x.purge.cron"})
    assert (set(poolless.jobs), set(poolless.tasks)) == (set(), set())
    off = read_common({**env, "UJOBS_PURGE": "off"}, "worker")
    nothing = Registry()
    register_purge(nothing, off, pool=object(), task=True)  # type: ignore[arg-type]
    assert (nothing.jobs, nothing.tasks) == ({}, {})


async def test_the_scheduler_service_is_handed_x_purge_with_no_app_code(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ujobs.services.scheduler as scheduler_service

    handed: list[Any] = []
    real = job_scheduler

    def spy(**kwargs: Any) -> Any:
        handed.extend(kwargs["tasks"])
        return real(**kwargs)

    monkeypatch.setattr(scheduler_service, "job_scheduler", spy)
    config = SchedulerConfig.load({"DATABASE_URL": pg_dsn, "UJOBS_PURGE_CRON": "* * * * *"})
    async with contextlib.AsyncExitStack() as stack:
        run = ServiceRun(common=config.common, stack=stack)
        scheduler = await start_scheduler(run, config)
        await scheduler.stop()
    assert [(t.name, t.cron) for t in handed] == [("x.purge.cron", "* * * * *")]
