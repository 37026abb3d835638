"""``ujobs tasks list`` and the ``ujobs scheduler`` command's refusals, in-process."""

from __future__ import annotations

import asyncio
import time

import asyncpg
import orjson
from typer.testing import CliRunner

from tests.support import scheduler_app
from ujobs.drivers.postgres.driver import postgres_driver
from ujobs.jobs.task import TaskHandle
from ujobs.scheduler.state_postgres import postgres_scheduler_state
from ujobs.services.cli.app import app

APP = "tests.support.scheduler_app:api"
OCCURRENCE = 1_700_000_000_000


async def _seed(dsn: str) -> None:
    """A fire of every-second (through the scheduler's own statement) and a paused nightly."""
    pool = await asyncpg.create_pool(dsn, min_size=1, max_size=1)
    assert pool is not None
    try:
        state = postgres_scheduler_state(pool)
        task: TaskHandle = scheduler_app.every_second
        assert await state.fire(task.name, OCCURRENCE, task.requests_for(OCCURRENCE))
        await postgres_driver(pool).introspect.pause_task("nightly")
    finally:
        await pool.close()


def test_tasks_list_json_shows_cron_tz_catch_up_last_and_next_fire(pg_dsn: str) -> None:
    asyncio.run(_seed(pg_dsn))
    before = int(time.time() * 1000)
    result = CliRunner().invoke(
        app, ["tasks", "list", "--json", "--app", APP], env={"DATABASE_URL": pg_dsn}
    )
    assert result.exit_code == 0, result.output
    rows = orjson.loads(result.stdout)["tasks"]
    assert [r["name"] for r in rows] == ["every-second", "nightly"]
    every, nightly = rows
    assert (every["cron"], every["tz"], every["catchUp"]) == ("* * * * * *", "UTC", "run-all")
    assert every["lastFire"]["occurrenceMs"] == OCCURRENCE
    assert every["paused"] is False
    assert before < every["nextFireMs"] <= int(time.time() * 1000) + 1_000
    assert (nightly["tz"], nightly["catchUp"], nightly["lastFire"]) == (
        "America/New_York",
        "skip",
        None,
    )
    assert nightly["paused"] is True
    assert nightly["nextFire"].endswith(("06:00:00+00:00", "07:00:00+00:00"))  # 02:00 NY


def test_tasks_list_without_a_database_prints_the_declarations() -> None:
    result = CliRunner().invoke(app, ["tasks", "list", "--app", APP], env={"DATABASE_URL": ""})
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split() == [
        "TASK",
        "CRON",
        "TZ",
        "CATCH-UP",
        "LAST",
        "FIRE",
        "NEXT",
        "FIRE",
        "PAUSED",
    ]
    assert lines[1].startswith("every-second")
    assert lines[2].startswith("nightly")
    assert lines[2].split()[-1] == "?"


def test_tasks_show_is_one_tasks_descriptor_with_its_fires(pg_dsn: str) -> None:
    asyncio.run(_seed(pg_dsn))
    result = CliRunner().invoke(
        app, ["tasks", "show", "every-second", "--json", "--app", APP], env={"DATABASE_URL": pg_dsn}
    )
    assert result.exit_code == 0, result.output
    shown = orjson.loads(result.stdout)
    task: TaskHandle = scheduler_app.every_second
    assert shown["kind"] == "task"
    assert (shown["name"], shown["cron"], shown["tz"]) == ("every-second", "* * * * * *", "UTC")
    assert (shown["catchUp"], shown["maxCatchUp"]) == ("run-all", task.max_catch_up)
    assert shown["jobs"] == ["e2e-tick"] * scheduler_app.ENTRIES  # declaration order
    assert shown["lastFire"]["occurrenceMs"] == OCCURRENCE
    assert shown["paused"] is False
    nightly = CliRunner().invoke(
        app, ["tasks", "show", "nightly", "--app", APP], env={"DATABASE_URL": pg_dsn}
    )
    assert nightly.exit_code == 0, nightly.output
    fields = dict(line.split(None, 1) for line in nightly.stdout.splitlines() if " " in line)
    assert fields["paused"].strip() == "yes"
    assert fields["cron"].startswith("0 2 * * *")


def test_tasks_show_names_the_declared_tasks_for_an_unknown_one() -> None:
    result = CliRunner().invoke(
        app, ["tasks", "show", "every-secnd", "--json", "--app", APP], env={"DATABASE_URL": ""}
    )
    assert result.exit_code == 1
    error = orjson.loads(result.stdout)["error"]
    assert error["code"] == "X_TASK_UNKNOWN"
    assert error["meta"]["declared"] == ["every-second", "nightly"]


def test_the_scheduler_refuses_to_start_without_postgres() -> None:
    result = CliRunner().invoke(app, ["scheduler", "--app", APP], env={"DATABASE_URL": ""})
    assert result.exit_code == 1
    assert "X_DRIVER_UNAVAILABLE" in result.stderr


def test_the_scheduler_refuses_an_app_that_does_not_load(pg_dsn: str) -> None:
    result = CliRunner().invoke(
        app, ["scheduler", "--app", "no_such_module:api"], env={"DATABASE_URL": pg_dsn}
    )
    assert result.exit_code == 1
    assert "X_CONFIG_INVALID" in result.stderr
