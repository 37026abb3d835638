"""Operator slips the CLI catches: a ``--from-step`` the run never recorded, the short ids it
prints (a unique start of an id) taken back by every command, ``--version``, and service
``--help`` naming the variables the service reads."""

from __future__ import annotations

from importlib.metadata import version
from typing import Any

import pytest
import typer.main

from tests.support.cli import enqueue, json_of, run_to, ujobs, with_driver
from tests.support.docs import page
from ujobs.drivers.postgres.driver import PostgresDriver
from ujobs.introspect import SHORT_ID_LENGTH, short_id
from ujobs.services.cli.app import app
from ujobs.services.config.variables import VARIABLES


def _done_job(dsn: str, key: str = "k-done") -> str:
    async def work(driver: PostgresDriver) -> str:
        job_id = await enqueue(driver, "onboard_org", key)
        await run_to(driver, job_id, steps=("a", "b"))
        return job_id

    return with_driver(dsn, work)


def test_retry_from_a_step_the_run_never_recorded_is_refused(pg_dsn: str) -> None:
    job_id = _done_job(pg_dsn)
    result = ujobs("jobs", "retry", job_id, "--from-step", "charge", dsn=pg_dsn)
    assert result.exit_code == 1
    assert result.stderr.startswith("X_STEP_NOT_FOUND: ")
    assert "recorded: a, b" in result.stderr
    doc = json_of(ujobs("jobs", "show", job_id, "--json", dsn=pg_dsn))
    assert doc["state"] == "done"  # nothing moved
    assert [s["name"] for s in doc["steps"]] == ["a", "b"]
    refused = json_of(ujobs("jobs", "retry", job_id, "--from-step", "x", "--json", dsn=pg_dsn))
    assert refused["error"]["meta"]["recorded"] == ["a", "b"]


@pytest.mark.parametrize(
    ("command", "state"),
    [
        (("jobs", "show"), "done"),
        (("jobs", "retry"), "ready"),
        (("jobs", "remove"), None),
    ],
)
def test_every_id_command_takes_the_short_id(
    pg_dsn: str, command: tuple[str, ...], state: str | None
) -> None:
    job_id = _done_job(pg_dsn)
    short = short_id(job_id)
    assert len(short) == SHORT_ID_LENGTH < len(job_id)
    result = ujobs(*command, short.upper(), "--json", dsn=pg_dsn)
    assert result.exit_code == 0, result.output
    if state is not None:
        doc = json_of(result)
        assert (doc["id"], doc["state"]) == (job_id, state)
    else:
        assert ujobs("jobs", "show", job_id, dsn=pg_dsn).exit_code == 1  # it was removed


def test_cancel_and_promote_take_the_short_id(pg_dsn: str) -> None:
    async def work(driver: PostgresDriver) -> tuple[str, str]:
        later = await enqueue(
            driver, "report", "k-later", queue="reports", run_at_ms=driver.clock.now_ms() + 60_000
        )
        other = await enqueue(driver, "report", "k-other", queue="reports")
        return later, other

    later, other = with_driver(pg_dsn, work)
    promoted = json_of(ujobs("jobs", "promote", short_id(later), "--json", dsn=pg_dsn))
    assert (promoted["id"], promoted["state"]) == (later, "ready")
    cancelled = json_of(ujobs("jobs", "cancel", short_id(other), "--json", dsn=pg_dsn))
    assert (cancelled["id"], cancelled["state"]) == (other, "cancelled")


def test_a_short_id_that_starts_several_ids_is_ambiguous_and_lists_them(pg_dsn: str) -> None:
    first = _done_job(pg_dsn, "k-1")
    second = _done_job(pg_dsn, "k-2")
    common = 0
    while first[common] == second[common]:
        common += 1
    result = ujobs("jobs", "show", first[:common], dsn=pg_dsn)
    assert result.exit_code == 1
    assert result.stderr.startswith("X_JOB_ID_AMBIGUOUS: ")
    assert first in result.stderr
    assert second in result.stderr
    missing = ujobs("jobs", "show", "ffffffff-ff", dsn=pg_dsn)
    assert missing.stderr.startswith("X_JOB_NOT_FOUND: ")


def test_version() -> None:
    result = ujobs("--version")
    assert result.exit_code == 0
    assert result.stdout == f"ujobs {version('ultimate-jobs')}\n"


@pytest.mark.parametrize(
    "service", ["api", "worker", "relay", "scheduler", "webhook-deliverer", "exporter", "dev"]
)
def test_service_help_names_the_variables_it_reads(service: str) -> None:
    result = ujobs(service, "--help", env={"COLUMNS": "400"})
    assert result.exit_code == 0
    read = [name for name, v in VARIABLES.items() if service in v.services]
    assert read
    epilog = result.stdout.split("Reads ", 1)[1]
    for name in read:
        assert name in epilog, name


def _leaves(command: Any, path: tuple[str, ...] = ()) -> dict[tuple[str, ...], Any]:
    if hasattr(command, "commands"):
        found: dict[tuple[str, ...], Any] = {}
        for name, sub in command.commands.items():
            found.update(_leaves(sub, (*path, name)))
        return found
    return {path: command}


def test_database_url_works_exactly_where_the_configuration_page_says() -> None:
    section = " ".join(page("reference/configuration.md").split())
    assert "`--database-url` on `ujobs db migrate` and the operator commands" in section
    assert "the services read `DATABASE_URL` only" in section
    services = {"api", "worker", "relay", "scheduler", "webhook-deliverer", "exporter", "dev"}
    operator = {"db", "jobs", "queues", "tasks", "workers"}
    for path, command in _leaves(typer.main.get_command(app)).items():
        flags = {opt for param in command.params for opt in getattr(param, "opts", [])}
        if path[0] in operator:
            assert "--database-url" in flags, path
        if path[0] in services:
            assert "--database-url" not in flags, path
