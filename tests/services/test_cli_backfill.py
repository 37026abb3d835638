"""``ujobs db backfill``: --list, --pending (non-zero while anything is unswept), NAME (a dry
run), NAME --write [--force], --all --write (SEED § Running one, § Three optional declarations).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import asyncpg
import pytest

from tests.services.backfill_app import sweeps
from tests.support.cli import json_of, ujobs, with_driver
from ujobs.drivers.postgres.driver import PostgresDriver

APP = "tests.services.backfill_app:api"
MIGRATION = "20260814120000_add_publish_at"
NO_FORCE = '{"force": null}'


@pytest.fixture(autouse=True)
def _collected() -> None:
    gc.collect()  # another test's backfills, kept alive only by a cycle, are declared no more


@pytest.fixture
def dsn(pg_dsn: str) -> Iterator[str]:
    yield pg_dsn
    with_driver(pg_dsn, lambda d: _sql(d, "delete from x_migrations where id = $1", MIGRATION))


async def _sql(driver: PostgresDriver, statement: str, *args: Any) -> None:
    await driver.pool.execute(statement, *args)


def sql(dsn: str, statement: str, *args: Any) -> None:
    with_driver(dsn, lambda d: _sql(d, statement, *args))


def backfill(dsn: str, *args: str, env: dict[str, str] | None = None) -> Any:
    return ujobs("db", "backfill", *args, "--app", APP, dsn=dsn, env=env)


async def _jobs(driver: PostgresDriver) -> list[asyncpg.Record]:
    return list(await driver.pool.fetch("select name, input::text as input from x_jobs"))


def jobs(dsn: str) -> list[tuple[str, str]]:
    return [(r["name"], r["input"]) for r in with_driver(dsn, _jobs)]


def ledger_row(
    dsn: str, name: str, run_id: str, status: str, checksum: str = "c", tenant: str | None = None
) -> None:
    sql(
        dsn,
        "insert into x_backfills (name, run_id, checksum, status, rows_processed, started_at,"
        " tenant_id) values ($1, $2, $3, $4, 7, now(), $5)",
        name,
        run_id,
        checksum,
        status,
        tenant,
    )


def test_the_list_is_the_ledger_newest_first(dsn: str) -> None:
    empty = backfill(dsn, "--list")
    assert empty.exit_code == 0
    assert "empty" in empty.stderr
    ledger_row(dsn, "rewrite-slugs", "run-1", "completed")
    listed = json_of(backfill(dsn, "--list", "--json"))["backfills"]
    assert [(r["name"], r["runId"], r["status"], r["rowsProcessed"]) for r in listed] == [
        ("rewrite-slugs", "run-1", "completed", 7)
    ]
    assert json_of(backfill(dsn, "--list", "--status", "failed", "--json")) == {"backfills": []}


def test_the_list_and_jobs_show_say_which_tenant_a_pass_swept(dsn: str) -> None:
    queued = json_of(backfill(dsn, "rewrite-slugs", "--write", "--json"))["enqueued"]
    sql(
        dsn,
        "insert into x_backfills (name, run_id, checksum, status, rows_processed, started_at,"
        " tenant_id) values ('rewrite-slugs', $1, 'c', 'running', 5, now(), 'org_1')",
        queued["runId"],
    )
    ledger_row(dsn, "rewrite-slugs", "run-old", "completed")  # a pass over every tenant
    listed = json_of(backfill(dsn, "--list", "--json"))["backfills"]
    assert {r["runId"]: r["tenant"] for r in listed} == {queued["runId"]: "org_1", "run-old": None}
    table = backfill(dsn, "--list").stdout.splitlines()
    assert table[0].split()[:3] == ["NAME", "TENANT", "STATUS"]
    assert sorted(line.split()[1] for line in table[1:]) == ["*", "org_1"]
    shown = json_of(ujobs("jobs", "show", queued["id"], "--json", dsn=dsn))
    assert shown["backfill"]["tenant"] == "org_1"
    assert "backfill rewrite-slugs (tenant org_1) in flight: 5 rows" in (
        ujobs("jobs", "list", dsn=dsn).stderr
    )


def test_pending_exits_non_zero_while_anything_is_unswept(dsn: str) -> None:
    staging = {"UJOBS_ENVIRONMENT": "staging"}
    result = backfill(dsn, "--pending", "--json", env=staging)
    assert result.exit_code == 3
    answer = json_of(result)
    assert answer["environment"] == "staging"
    states = {r["name"]: r["state"] for r in answer["rows"]}
    assert states == {
        "drop-legacy": "pending",
        "per-org": "excluded",
        "prod-only": "excluded",
        "rewrite-slugs": "pending",
    }
    assert answer["pending"] == ["drop-legacy", "rewrite-slugs"]
    assert answer["error"]["code"] == "X_BACKFILL_PENDING"
    assert answer["error"]["meta"] == {"pending": ["drop-legacy", "rewrite-slugs"]}
    table = backfill(dsn, "--pending", env=staging)
    assert table.exit_code == 3
    assert "X_BACKFILL_PENDING: unswept: drop-legacy, rewrite-slugs" in table.stderr

    ledger_row(dsn, "rewrite-slugs", "run-1", "running")
    ledger_row(dsn, "drop-legacy", "run-2", "failed")
    answer = json_of(backfill(dsn, "--pending", "--json", env=staging))
    assert answer["pending"] == ["drop-legacy"]  # running is not pending: failed is

    ledger_row(dsn, "drop-legacy", "run-3", "completed")
    ledger_row(dsn, "gone-from-the-code", "run-4", "completed")
    done = backfill(dsn, "--pending", "--json", env=staging)
    assert done.exit_code == 0
    assert json_of(done)["orphaned"] == ["gone-from-the-code"]
    assert "error" not in json_of(done)


def test_one_orgs_completed_pass_completes_only_that_orgs_scope(dsn: str) -> None:
    tenancy = {"UJOBS_ENVIRONMENT": "tenancy"}
    ledger_row(dsn, "per-org", "run-a", "completed", tenant="org_a")
    ledger_row(dsn, "rewrite-slugs", "run-x", "completed", tenant="org_a")  # not its scope

    answer = json_of(backfill(dsn, "--pending", "--json", env=tenancy))
    scopes = {(r["name"], r["tenant"]): r["state"] for r in answer["rows"]}
    assert scopes[("per-org", "org_a")] == "completed"
    assert scopes[("rewrite-slugs", None)] == "pending"
    assert "per-org" not in answer["pending"]
    table = backfill(dsn, "--pending", env=tenancy).stdout.splitlines()
    assert table[0].split()[:3] == ["NAME", "TENANT", "STATE"]

    org_b = backfill(dsn, "--pending", "--tenant", "org_b", "--json", env=tenancy)
    assert org_b.exit_code == 3
    rows = [(r["tenant"], r["state"]) for r in json_of(org_b)["rows"] if r["name"] == "per-org"]
    assert rows == [("org_b", "pending")]
    assert "per-org" in json_of(org_b)["pending"]

    dry = json_of(backfill(dsn, "per-org", "--tenant", "org_a", "--json", env=tenancy))
    assert dry["completedBy"] == "run-a"
    dry = json_of(backfill(dsn, "per-org", "--tenant", "org_b", "--json", env=tenancy))
    assert dry["completedBy"] is None
    # count() is called as the pass calls it: under the actor of the org it sweeps.
    assert dry["wouldTouch"] == sweeps.LEFT_BY_ORG["org_b"]
    dry = json_of(backfill(dsn, "per-org", "--json", env=tenancy))
    assert dry["wouldTouch"] == sweeps.LEFT_BY_ORG["org_1"]  # the org --write queues it for

    # The pass this enqueues is org_1's: org_a's completed row does not refuse it.
    written = backfill(dsn, "per-org", "--write", "--json", env=tenancy)
    assert written.exit_code == 0, written.stdout
    assert [name for name, _ in jobs(dsn)] == ["per-org"]


def test_a_name_alone_is_a_dry_run_that_queues_nothing(dsn: str) -> None:
    sweeps.LEFT["rows"] = 42
    answer = json_of(backfill(dsn, "rewrite-slugs", "--json"))
    assert answer["dryRun"] is True
    assert answer["gate"] == {"ok": True}
    assert answer["wouldTouch"] == 42
    assert answer["completedBy"] is None
    assert jobs(dsn) == []
    table = backfill(dsn, "rewrite-slugs")
    assert table.exit_code == 0
    assert "42" in table.stdout
    assert "--write" in table.stderr


def test_the_dry_run_parses_count_as_the_pass_does(dsn: str) -> None:
    sweeps.LEFT["rows"] = -1
    try:
        refused = backfill(dsn, "rewrite-slugs", "--json")
    finally:
        sweeps.LEFT["rows"] = 42
    assert refused.exit_code == 1
    assert json_of(refused)["error"]["code"] == "X_INVARIANT"


def test_requires_is_checked_against_x_migrations_before_anything_is_queued(dsn: str) -> None:
    staging = {"UJOBS_ENVIRONMENT": "staging"}
    dry = json_of(backfill(dsn, "drop-legacy", "--json", env=staging))
    assert dry["gate"]["error"]["code"] == "X_BACKFILL_MIGRATION_PENDING"
    refused = backfill(dsn, "drop-legacy", "--write", "--json", env=staging)
    assert refused.exit_code == 1
    assert json_of(refused)["error"]["code"] == "X_BACKFILL_MIGRATION_PENDING"
    assert jobs(dsn) == []
    sql(dsn, "insert into x_migrations (id, checksum) values ($1, 'app')", MIGRATION)
    queued = json_of(backfill(dsn, "drop-legacy", "--write", "--json", env=staging))
    assert queued["enqueued"]["deduped"] is False
    assert jobs(dsn) == [("drop-legacy", NO_FORCE)]


def test_environments_is_checked_before_the_cli_queues_work_that_would_dead_letter(
    dsn: str,
) -> None:
    refused = backfill(dsn, "prod-only", "--write", "--json", env={"UJOBS_ENVIRONMENT": "staging"})
    assert refused.exit_code == 1
    assert json_of(refused)["error"]["code"] == "X_BACKFILL_ENVIRONMENT"
    unnamed = backfill(dsn, "prod-only", "--write", "--json")
    assert json_of(unnamed)["error"]["code"] == "X_BACKFILL_ENVIRONMENT"
    assert jobs(dsn) == []


def test_write_enqueues_a_live_pass_once_and_force_reruns_a_completed_one(dsn: str) -> None:
    first = json_of(backfill(dsn, "rewrite-slugs", "--write", "--json"))
    again = json_of(backfill(dsn, "rewrite-slugs", "--write", "--json"))
    assert again["enqueued"]["deduped"] is True
    assert again["enqueued"]["id"] == first["enqueued"]["id"]
    # A forced rerun while that pass is live would be the same pass: refused, not "queued".
    running = backfill(dsn, "rewrite-slugs", "--write", "--force", "--json")
    assert running.exit_code == 1
    error = json_of(running)["error"]
    assert (error["code"], error["meta"]["id"]) == ("X_BACKFILL_RUNNING", first["enqueued"]["id"])
    assert jobs(dsn) == [("rewrite-slugs", NO_FORCE)]
    sql(dsn, "update x_jobs set state = 'done', finished_at = now()")
    ledger_row(dsn, "rewrite-slugs", first["enqueued"]["runId"], "completed")

    applied = backfill(dsn, "rewrite-slugs", "--write", "--json")
    assert applied.exit_code == 1
    assert json_of(applied)["error"]["code"] == "X_BACKFILL_APPLIED"
    forced = json_of(backfill(dsn, "rewrite-slugs", "--write", "--force", "--json"))
    assert forced["force"] is True
    assert forced["enqueued"]["deduped"] is False
    assert sorted(jobs(dsn)) == [("rewrite-slugs", NO_FORCE), ("rewrite-slugs", '{"force": true}')]


def test_all_write_enqueues_every_pending_one_isolated_per_name(dsn: str) -> None:
    staging = {"UJOBS_ENVIRONMENT": "staging"}
    result = backfill(dsn, "--all", "--write", "--json", env=staging)
    assert result.exit_code == 1  # drop-legacy's migration is pending
    results = {r["name"]: r for r in json_of(result)["results"]}
    assert set(results) == {"drop-legacy", "rewrite-slugs"}
    assert results["drop-legacy"]["error"]["code"] == "X_BACKFILL_MIGRATION_PENDING"
    assert results["rewrite-slugs"]["enqueued"]["deduped"] is False
    assert jobs(dsn) == [("rewrite-slugs", NO_FORCE)]


def test_usage_and_unknown_names(dsn: str) -> None:
    assert backfill(dsn).exit_code == 2
    assert backfill(dsn, "--list", "--pending").exit_code == 2
    assert backfill(dsn, "--all").exit_code == 2  # --all only writes
    unknown = backfill(dsn, "rewrite-slug", "--json")
    assert unknown.exit_code == 1
    error = json_of(unknown)["error"]
    assert error["code"] == "X_BACKFILL_UNKNOWN"
    assert "rewrite-slugs" in error["meta"]["declared"]


def test_follow_watches_the_pass_until_its_ledger_row_ends(dsn: str) -> None:
    import threading

    def a_worker_sweeps() -> None:
        async def sweep(driver: PostgresDriver) -> None:
            run_id = None
            while run_id is None:
                run_id = await driver.pool.fetchval("select run_id from x_jobs limit 1")
            await driver.pool.execute(
                "insert into x_backfills (name, run_id, checksum, status, rows_processed,"
                " started_at, completed_at) values ('rewrite-slugs', $1, 'c', 'completed', 42,"
                " now(), now())",
                run_id,
            )

        with_driver(dsn, sweep)

    worker = threading.Thread(target=a_worker_sweeps)
    worker.start()
    answer = json_of(backfill(dsn, "rewrite-slugs", "--write", "--follow", "--json"))
    worker.join(timeout=30)
    assert answer["final"]["status"] == "completed"
    assert answer["final"]["rowsProcessed"] == 42
    assert answer["final"]["runId"] == answer["enqueued"]["runId"]


def test_jobs_list_shows_the_passes_in_flight_and_jobs_show_the_runs_ledger_row(dsn: str) -> None:
    queued = json_of(backfill(dsn, "rewrite-slugs", "--write", "--json"))["enqueued"]
    sql(
        dsn,
        "insert into x_backfills (name, run_id, checksum, status, rows_processed, last_cursor,"
        " started_at) values ('rewrite-slugs', $1, 'c', 'running', 3000, '{\"id\": 3000}', now())",
        queued["runId"],
    )
    page = json_of(ujobs("jobs", "list", "--json", dsn=dsn))
    assert [(p["name"], p["rowsProcessed"], p["lastCursor"]) for p in page["backfills"]] == [
        ("rewrite-slugs", 3000, {"id": 3000})
    ]
    table = ujobs("jobs", "list", dsn=dsn)
    assert "backfill rewrite-slugs in flight: 3000 rows" in table.stderr
    shown = json_of(ujobs("jobs", "show", queued["id"], "--json", dsn=dsn))
    assert shown["backfill"]["runId"] == queued["runId"]
    assert shown["backfill"]["status"] == "running"

    sql(
        dsn,
        "insert into x_jobs (id, run_id, name, state, input, idempotency_key, max_attempts,"
        " run_at, created_at, updated_at) values ('plain', 'plain-run', 'j', 'ready', '{}',"
        " 'k', 1, now(), now(), now())",
    )
    plain = json_of(ujobs("jobs", "show", "plain", "--json", dsn=dsn))
    assert plain["backfill"] is None


def test_the_dry_run_counts_with_the_apps_context_as_a_pass_does(dsn: str) -> None:
    from tests.services import backfill_ctx_app

    backfill_ctx_app.OPENED.clear()
    answer = ujobs(
        "db",
        "backfill",
        "counted-through-ctx",
        "--json",
        "--app",
        "tests.services.backfill_ctx_app:api",
        dsn=dsn,
    )
    assert answer.exit_code == 0, answer.stdout + answer.stderr
    assert json_of(answer)["wouldTouch"] == 17
    assert backfill_ctx_app.OPENED == ["open", "close"]
