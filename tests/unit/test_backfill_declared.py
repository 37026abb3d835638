"""What was DECLARED beside what has RUN: ``registered_backfills()``, ``is_backfill()``,
``pending_backfills()``, ``gate_backfill()`` and the one projection (SEED § What was DECLARED,
§ Three optional declarations)."""

from __future__ import annotations

import gc
from typing import Any

import pytest

from tests.unit.backfill_kit import Table, Writer
from ujobs import job
from ujobs.backfill import (
    backfill,
    gate_backfill,
    inspect_backfills,
    is_backfill,
    pending_backfills,
    registered_backfills,
)
from ujobs.backfill.declare import definition_of
from ujobs.backfill.ledger_view import backfill_named
from ujobs.clock import FrozenClock
from ujobs.drivers.memory.backfills import MemoryBackfillLedger
from ujobs.errors import (
    BackfillEnvironmentError,
    BackfillMigrationPendingError,
    BackfillUnknownError,
)
from ujobs.jobs.job import JobHandle


@pytest.fixture(autouse=True)
def _collected() -> None:
    """Another test's declarations, kept alive only by a cycle (a traceback), are collected."""
    gc.collect()


def declared(name: str, **options: Any) -> JobHandle[Any]:
    table = Table(0)
    return backfill(name=name, source=table.source, handle=Writer(table), tenant="none", **options)


def test_registered_backfills_lists_every_declaration_with_no_registration() -> None:
    # Held as a module holds its declarations: the stamp is weak, like task()'s origin map.
    held = [
        declared("b-second", requires="20260814120000_add_publish_at", count=lambda _ctx: 0),
        declared("a-first", environments=["staging", "production"]),
    ]
    rows = [r for r in registered_backfills() if r["name"] in ("a-first", "b-second")]
    assert [r["name"] for r in rows] == ["a-first", "b-second"]  # by name
    first, second = rows
    assert first["kind"] == "backfill"
    assert first["environments"] == ["staging", "production"]
    assert (first["requires"], first["counts"]) == (None, False)
    assert (second["requires"], second["counts"]) == ("20260814120000_add_publish_at", True)
    assert len(first["checksum"]) == 64
    del held
    # A definition garbage-collected is declared no more.
    assert not {"a-first", "b-second"} & {r["name"] for r in registered_backfills()}


def test_is_backfill_is_true_only_for_what_backfill_answered() -> None:
    sweep = declared("sweep")
    assert is_backfill(sweep)
    plain = job(name="plain", run=_noop, idempotency_key="k", tenant="none")
    assert not is_backfill(plain)
    assert not is_backfill(JobHandle(sweep.definition))  # a look-alike: same name and body
    assert not is_backfill("sweep")
    assert not is_backfill(None)


async def _noop(_run: Any) -> None:
    return None


def _run(
    name: str, status: str, run_id: str, checksum: str = "c", tenant: str | None = None
) -> dict[str, Any]:
    return {
        "name": name,
        "runId": run_id,
        "checksum": checksum,
        "status": status,
        "rowsProcessed": 10,
        "tenant": tenant,
    }


def test_pending_backfills_says_which_state_each_declaration_is_in() -> None:
    declarations: list[dict[str, Any]] = [
        {"name": "never-run", "checksum": "c", "environments": None},
        {"name": "broke", "checksum": "c", "environments": None},
        {"name": "sweeping", "checksum": "c", "environments": None},
        {"name": "done", "checksum": "c", "environments": None},
        {"name": "moved", "checksum": "new", "environments": None},
        {"name": "prod-only", "checksum": "c", "environments": ["production"]},
        {"name": "retried-after-done", "checksum": "c", "environments": None},
    ]
    runs = [  # newest first, as the ledger answers
        _run("broke", "failed", "r1"),
        _run("sweeping", "running", "r2"),
        _run("done", "completed", "r3"),
        _run("moved", "completed", "r4", checksum="old"),
        _run("retried-after-done", "failed", "r5"),
        _run("retried-after-done", "completed", "r6"),
        _run("deleted-from-the-code", "completed", "r7"),
    ]
    answer = pending_backfills(declarations=declarations, runs=runs, environment="staging")
    states = {r["name"]: r["state"] for r in answer["rows"]}
    assert states == {
        "never-run": "pending",
        "broke": "failed",
        "sweeping": "running",
        "done": "completed",
        "moved": "completed",
        "prod-only": "excluded",
        "retried-after-done": "completed",  # a completed row exists: nothing re-runs
    }
    assert answer["pending"] == ["never-run", "broke"]
    assert answer["orphaned"] == ["deleted-from-the-code"]
    assert answer["environment"] == "staging"
    moved = {r["name"]: r["checksumMoved"] for r in answer["rows"]}
    assert moved["moved"] is True
    assert moved["done"] is False


def test_one_orgs_completed_pass_completes_only_that_orgs_scope() -> None:
    """A completed row blocks a pass of its own scope only (SEED § The x_backfills ledger; the
    ledger records the tenant since 0014), and the diff says so per scope."""
    declarations: list[dict[str, Any]] = [
        {"name": "per-org", "checksum": "c", "environments": None, "tenant": "scoped"},
        {"name": "everyone", "checksum": "c", "environments": None, "tenant": "none"},
        {"name": "per-org-new", "checksum": "c", "environments": None, "tenant": "scoped"},
    ]
    runs = [
        _run("per-org", "failed", "r1", tenant="org_b"),
        _run("per-org", "completed", "r2", tenant="org_a"),
        _run("everyone", "completed", "r3", tenant="org_a"),  # another scope than the sweep's
    ]
    answer = pending_backfills(declarations=declarations, runs=runs, environment=None)
    states = {(r["name"], r["tenant"]): r["state"] for r in answer["rows"]}
    assert states == {
        ("per-org", "org_a"): "completed",
        ("per-org", "org_b"): "failed",
        ("everyone", None): "pending",
        ("per-org-new", None): "pending",
    }
    assert answer["pending"] == ["per-org", "everyone", "per-org-new"]

    # Asked for one org: org_c has no row, so it is pending although org_a completed.
    for org, state in (("org_a", "completed"), ("org_b", "failed"), ("org_c", "pending")):
        one = pending_backfills(
            declarations=declarations[:1], runs=runs, environment=None, tenant=org
        )
        assert [(r["tenant"], r["state"]) for r in one["rows"]] == [(org, state)]
        assert one["pending"] == ([] if state == "completed" else ["per-org"])


def test_a_declaration_says_whether_its_passes_are_scoped_to_a_tenant() -> None:
    everyone = declared("every-tenant")
    per_org = backfill(
        name="per-org-scope",
        source=Table(0).source,
        handle=Writer(Table(0)),
        tenant=lambda value: "org_1",
    )
    rows = {r["name"]: r["tenant"] for r in registered_backfills()}
    assert (rows["every-tenant"], rows["per-org-scope"]) == ("none", "scoped")
    assert is_backfill(everyone)
    assert is_backfill(per_org)


async def test_pending_reads_the_process_declarations_and_the_one_projection() -> None:
    held = [declared("swept"), declared("unswept")]
    ledger = MemoryBackfillLedger(FrozenClock(1_000))
    await ledger.begin("swept", "run-1", "c", "v1")
    await ledger.progress("swept", "run-1", 42, {"id": 42})
    await ledger.finish("swept", "run-1", "completed")
    runs = await inspect_backfills(ledger)
    assert runs == [
        {
            "name": "swept",
            "runId": "run-1",
            "checksum": "c",
            "status": "completed",
            "appVersion": "v1",
            "rowsProcessed": 42,
            "lastCursor": {"id": 42},
            "startedAtMs": 1_000,
            "completedAtMs": 1_000,
            "error": None,
            "tenant": None,
        }
    ]
    assert await inspect_backfills(None) == []
    assert await inspect_backfills(ledger, run_id="other") == []
    answer = pending_backfills(runs=runs, environment=None)
    assert "unswept" in answer["pending"]
    assert "swept" not in answer["pending"]
    assert len(held) == 2


def test_the_gate_refuses_an_excluded_environment_and_a_pending_migration() -> None:
    sweep = declared(
        "drop-legacy", requires="20260814120000_add_publish_at", environments=["production"]
    )
    definition = definition_of(sweep)
    assert definition is not None
    with pytest.raises(BackfillEnvironmentError) as env:
        gate_backfill(definition, environment="staging", applied={"20260814120000_add_publish_at"})
    assert env.value.code == "X_BACKFILL_ENVIRONMENT"
    with pytest.raises(BackfillMigrationPendingError) as pending:
        gate_backfill(definition, environment="production", applied={"0001_jobs"})
    assert pending.value.code == "X_BACKFILL_MIGRATION_PENDING"
    assert pending.value.meta["requires"] == "20260814120000_add_publish_at"
    gate_backfill(definition, environment="production", applied={"20260814120000_add_publish_at"})
    unrestricted = definition_of(declared("anywhere"))
    assert unrestricted is not None
    gate_backfill(unrestricted, environment=None, applied=None)


def test_an_unknown_name_is_x_backfill_unknown_listing_the_declared_ones() -> None:
    held = declared("known")
    with pytest.raises(BackfillUnknownError) as unknown:
        backfill_named("knwon")
    assert "known" in unknown.value.meta["declared"]
    handle, definition = backfill_named("known")
    assert definition.name == handle.name == "known"
    assert handle is held
