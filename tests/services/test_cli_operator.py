"""``ujobs queues``, ``ujobs workers``, ``ujobs db migrate``; how every command fails (its X_ code,
a sentence, an exit code, never a traceback or a password) and shows progress when slow."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import asyncpg
import pytest
import typer

from tests.support.cli import ROOT, enqueue, json_of, ujobs, ujobs_process, with_driver
from ujobs.drivers.base import WorkerInfo
from ujobs.drivers.postgres.driver import PostgresDriver
from ujobs.drivers.postgres.migrate import MIGRATE_LOCK_KEY
from ujobs.services.runtime.output import EXIT_INTERNAL, reported, set_debug


def test_queues_list_pause_resume(pg_dsn: str) -> None:
    async def work(driver: PostgresDriver) -> None:
        await enqueue(driver, "a", "k1")
        await enqueue(driver, "b", "k2", queue="mail")

    with_driver(pg_dsn, work)
    assert ujobs("queues", "pause", "mail,idle", dsn=pg_dsn).exit_code == 0
    queues = {
        q["queue"]: q for q in json_of(ujobs("queues", "list", "--json", dsn=pg_dsn))["queues"]
    }
    assert sorted(queues) == ["default", "idle", "mail"]
    assert (queues["mail"]["paused"], queues["mail"]["ready"], queues["mail"]["due"]) == (
        True,
        1,
        1,
    )
    assert queues["idle"]["paused"] is True
    assert queues["default"]["paused"] is False
    table = ujobs("queues", "list", dsn=pg_dsn).stdout.splitlines()
    assert table[0].split()[:3] == ["QUEUE", "PAUSED", "READY"]
    assert table[1].split()[:3] == ["default", "no", "1"]
    assert table[3].split()[:3] == ["mail", "yes", "1"]
    resumed = ujobs("queues", "resume", "mail", "--json", dsn=pg_dsn)
    assert json_of(resumed) == {"queues": ["mail"], "paused": False}
    again = json_of(ujobs("queues", "list", "--json", dsn=pg_dsn))["queues"]
    assert [q["queue"] for q in again if q["paused"]] == ["idle"]


def test_workers_lists_the_live_registry(pg_dsn: str) -> None:
    async def work(driver: PostgresDriver) -> None:
        info = WorkerInfo("w-1", "host-a", 4242, driver.clock.now_ms(), ("default", "mail"), 8)
        await driver.workers.beat(info, ["j1", "j2"], 30_000, draining=True)

    with_driver(pg_dsn, work)
    [row] = json_of(ujobs("workers", "--json", dsn=pg_dsn))["workers"]
    assert (row["id"], row["host"], row["pid"], row["slots"]) == ("w-1", "host-a", 4242, 8)
    assert row["queues"] == ["default", "mail"]
    assert row["inFlight"] == ["j1", "j2"]
    assert row["drainingAtMs"] is not None
    header, line = ujobs("workers", dsn=pg_dsn).stdout.splitlines()
    assert header.split() == [
        "ID", "HOST", "PID", "QUEUES", "SLOTS", "IN", "FLIGHT", "STARTED", "LAST", "BEAT",
        "DRAINING",
    ]  # fmt: skip
    assert line.split()[:6] == ["w-1", "host-a", "4242", "default,mail", "8", "2"]


def test_a_driver_without_introspection_names_the_postgres_driver(redis_url: str) -> None:
    env = {"UJOBS_DRIVER": "redis", "REDIS_URL": redis_url, "UJOBS_REDIS_PREFIX": "ujcli"}
    for args in (("jobs", "list"), ("jobs", "show", "x"), ("queues", "pause", "a"), ("workers",)):
        result = ujobs(*args, "--json", env=env)
        assert result.exit_code == 1, result.output
        error = json_of(result)["error"]
        assert error["code"] == "X_NOT_IMPLEMENTED"
        assert "needs the Postgres driver" in error["message"]
    # The queue depth is a core read every driver answers.
    assert ujobs("queues", "list", "--json", env=env).exit_code == 0


def test_cancel_on_a_driver_without_cancel_is_not_cancellable(redis_url: str) -> None:
    env = {"UJOBS_DRIVER": "redis", "REDIS_URL": redis_url, "UJOBS_REDIS_PREFIX": "ujcli"}
    job_id = "01a2438f-64da-7245-86b0-696c09e4e793"
    result = ujobs("jobs", "cancel", job_id, "--json", env=env)
    assert result.exit_code == 1
    error = json_of(result)["error"]
    assert error["code"] == "X_JOB_NOT_CANCELLABLE"
    assert "UJOBS_DRIVER=postgres" in error["message"]


def test_no_database_is_driver_unavailable_naming_the_variable() -> None:
    result = ujobs("jobs", "list")
    assert result.exit_code == 1
    assert result.stderr.startswith("X_DRIVER_UNAVAILABLE: DATABASE_URL: ")


def test_an_unmigrated_database_says_to_migrate(pg_fresh_dsn: str) -> None:
    result = ujobs("jobs", "list", dsn=pg_fresh_dsn)
    assert result.exit_code == 1
    assert result.stderr.startswith("X_DRIVER_UNAVAILABLE: ")
    assert "run `ujobs db migrate`" in result.stderr
    migrated = ujobs("db", "migrate", "--json", dsn=pg_fresh_dsn)
    assert migrated.exit_code == 0, migrated.output
    assert json_of(migrated)["applied"][0] == "0001_jobs"
    assert ujobs("db", "migrate", dsn=pg_fresh_dsn).stdout.strip() == "up to date: nothing to apply"
    assert ujobs("jobs", "list", dsn=pg_fresh_dsn).exit_code == 0


def test_an_unreachable_database_is_one_line_without_a_password_or_a_traceback() -> None:
    from tests.support.servers import free_port

    url = f"postgresql://app:hunter2@127.0.0.1:{free_port()}/app"
    done = ujobs_process("jobs", "list", env={"DATABASE_URL": url})
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.startswith("X_DRIVER_UNAVAILABLE: could not reach the backend")
    assert "Traceback" not in done.stderr
    assert "hunter2" not in done.stderr
    as_json = ujobs_process("jobs", "list", "--json", "--database-url", url)
    assert as_json.returncode == 1
    assert "hunter2" not in as_json.stdout


def test_a_typo_in_a_ujobs_variable_fails_every_command() -> None:
    done = ujobs_process("workers", env={"UJOBS_DRIVR": "redis"})
    assert done.returncode == 1
    assert done.stderr.strip() == (
        "X_CONFIG_INVALID: UJOBS_DRIVR: no ujobs service reads this variable; "
        "did you mean 'UJOBS_DRIVER'?"
    )


def test_an_unexpected_error_is_one_x_internal_line_and_exit_70(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(typer.Exit) as exited, reported(as_json=False):
        raise ValueError("bad thing at postgresql://u:pw@h/db")
    assert exited.value.exit_code == EXIT_INTERNAL
    err = capsys.readouterr().err
    assert err.startswith("X_INTERNAL: unexpected ValueError: bad thing at postgresql://u:***@h/db")
    assert "--debug" in err
    assert len(err.strip().splitlines()) == 1


def test_debug_lets_the_traceback_through() -> None:
    set_debug(True)
    try:
        with pytest.raises(ValueError, match="detail"), reported(as_json=False):
            raise ValueError("detail")
    finally:
        set_debug(False)


def test_a_slow_command_shows_progress_on_stderr(pg_dsn: str) -> None:
    """``db migrate`` waits on the migration lock this test holds: after a second it says so
    on stderr, and finishes once the lock is let go."""

    async def scenario() -> tuple[int, str, str]:
        conn = await asyncpg.connect(pg_dsn)
        try:
            tx = conn.transaction()
            await tx.start()
            await conn.execute("select pg_advisory_xact_lock($1)", MIGRATE_LOCK_KEY)
            env = {k: v for k, v in os.environ.items() if not k.startswith("UJOBS_")}
            env["DATABASE_URL"] = pg_dsn
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "ujobs.services.cli", "db", "migrate",
                cwd=ROOT, env=env,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            )  # fmt: skip
            assert proc.stderr is not None
            first = await asyncio.wait_for(proc.stderr.readline(), 60)
            await tx.rollback()
            out, rest = await asyncio.wait_for(proc.communicate(), 60)
            return proc.returncode or 0, first.decode() + rest.decode(), out.decode()
        finally:
            await conn.close()

    code, err, out = asyncio.run(scenario())
    assert code == 0, err
    assert err.startswith("ujobs: migrating")
    assert out.strip() == "up to date: nothing to apply"
