"""The two halves of the ledger side by side: what was DECLARED (``registered_backfills()``)
and what has RUN (``driver.backfills``), and the one projection every surface reads.

* ``inspect_backfills(ledger, ...)``: the ledger rows as JSON-ready dicts — ``ujobs db backfill
  --list``, the in-flight passes of ``ujobs jobs list`` and the ``backfill`` key of ``ujobs jobs
  show`` all read this, so none of them can report a different number.
* ``pending_backfills(declarations, runs, environment, tenant)``: the diff, per name and
  ledger scope (a completed pass blocks its own tenant's scope only), in one of five states:
  ``pending`` (declared, no row), ``failed`` (the newest pass failed), ``running``,
  ``completed``, ``excluded`` (``environments`` leaves this one out). Only the first two are
  ``pending``: a check that is red for the whole of every sweep gets muted. A ledger name no
  declaration has is ``orphaned``.
* ``gate_backfill(handle, environment, applied)``: the CLI's pre-check before it queues work
  that would only dead-letter: ``X_BACKFILL_UNKNOWN``, ``X_BACKFILL_ENVIRONMENT``,
  ``X_BACKFILL_MIGRATION_PENDING`` (``requires`` is a migration id read from ``x_migrations``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict
from typing import Any, Literal

from ujobs.backfill.declare import (
    BackfillDefinition,
    checksum_moved,
    declared_backfills,
    definition_of,
)
from ujobs.backfill.pass_run import check_environment
from ujobs.drivers.base import BackfillLedger, BackfillRow, BackfillStatus
from ujobs.drivers.postgres.sql import query
from ujobs.errors import BackfillMigrationPendingError, BackfillUnknownError
from ujobs.jobs.job import JobHandle
from ujobs.outbox.store_postgres import PgFetch

_APPLIED = query("migrations_applied")

PendingState = Literal["pending", "failed", "running", "completed", "excluded"]


def is_backfill(handle: Any) -> bool:
    """True for a handle ``backfill()`` answered; a plain job, or a look-alike, is not one."""
    return definition_of(handle) is not None


def registered_backfills() -> list[dict[str, Any]]:
    """Every backfill this process declared: ``{kind, name, checksum, requires, environments,
    counts}``, by name."""
    return [definition.describe() for _, definition in declared_backfills()]


def backfill_named(name: str) -> tuple[JobHandle[Any], BackfillDefinition]:
    """The declared backfill ``name``, or ``X_BACKFILL_UNKNOWN`` listing the declared ones."""
    for handle, definition in declared_backfills():
        if definition.name == name:
            return handle, definition
    known = [d.name for _, d in declared_backfills()]
    raise BackfillUnknownError(
        f"no backfill is declared as {name!r}"
        + (
            f"; declared: {', '.join(known)}" if known else "; does --app / UJOBS_APP name the app?"
        ),
        meta={"backfill": name, "declared": known},
    )


def row_dict(row: BackfillRow) -> dict[str, Any]:
    """One ledger row in the wire's camelCase."""
    raw = asdict(row)
    return {
        "name": raw["name"],
        "runId": raw["run_id"],
        "checksum": raw["checksum"],
        "status": raw["status"],
        "appVersion": raw["app_version"],
        "rowsProcessed": raw["rows_processed"],
        "lastCursor": raw["last_cursor"],
        "startedAtMs": raw["started_at_ms"],
        "completedAtMs": raw["completed_at_ms"],
        "error": raw["error"],
        "tenant": raw["tenant"],
    }


async def inspect_backfills(
    ledger: BackfillLedger | None,
    *,
    name: str | None = None,
    status: BackfillStatus | None = None,
    limit: int = 100,
    run_id: str | None = None,
) -> list[dict[str, Any]]:
    """The ledger, newest pass first — the one projection every surface reads (empty when the
    driver keeps no ledger). ``run_id`` narrows it to that run's row (``jobs show``)."""
    if ledger is None:
        return []
    rows = await ledger.list(name=name, status=status, limit=limit)
    if run_id is not None:
        rows = [r for r in rows if r.run_id == run_id]
    return [row_dict(r) for r in rows]


def _state(
    declaration: Mapping[str, Any], newest: Mapping[str, Any] | None, completed: bool, env: Any
) -> PendingState:
    environments = declaration.get("environments")
    if environments is not None and env not in environments:
        return "excluded"
    if newest is not None and newest["status"] == "running":
        return "running"
    if completed:
        return "completed"
    if newest is not None and newest["status"] == "failed":
        return "failed"
    return "pending"


def _scopes(
    declaration: Mapping[str, Any], passes: Sequence[Mapping[str, Any]], tenant: str | None
) -> dict[str | None, list[Mapping[str, Any]]]:
    """The ledger scopes a declaration is judged in, each with its passes (newest first).

    A completed row blocks a pass of its own scope only (the pass asks ``latest_completed(name,
    tenant)``): ``tenant='none'`` has the one unscoped scope; a scoped declaration has one
    scope per org the ledger names (``tenant`` narrows it to that org, row or no row), or one
    ``pending`` scope when it has never run."""
    if declaration.get("tenant", "none") == "none":
        return {None: [p for p in passes if p.get("tenant") is None]}
    if tenant is not None:
        return {tenant: [p for p in passes if p.get("tenant") == tenant]}
    scopes: dict[str | None, list[Mapping[str, Any]]] = {}
    for run in passes:
        scopes.setdefault(run.get("tenant"), []).append(run)
    return dict(sorted(scopes.items(), key=lambda s: s[0] or "")) if scopes else {None: []}


def pending_backfills(
    *,
    runs: Sequence[Mapping[str, Any]],
    environment: str | None,
    declarations: Iterable[Mapping[str, Any]] | None = None,
    tenant: str | None = None,
) -> dict[str, Any]:
    """The diff of declared and run: ``{environment, rows, pending, orphaned}``, a row per
    declaration and ledger scope (``tenant``: the org, None for the unscoped one). ``runs``
    are ledger rows as ``inspect_backfills`` answers them (newest first); ``declarations``
    default to ``registered_backfills()``; ``tenant`` asks about one org's scope of the
    scoped declarations. A name is pending when any of its scopes is."""
    declared = list(registered_backfills() if declarations is None else declarations)
    by_name: dict[str, list[Mapping[str, Any]]] = {}
    for run in runs:
        by_name.setdefault(str(run["name"]), []).append(run)
    rows = []
    for declaration in declared:
        scopes = _scopes(declaration, by_name.get(declaration["name"], []), tenant)
        for scope, passes in scopes.items():
            newest = passes[0] if passes else None
            completed = next((p for p in passes if p["status"] == "completed"), None)
            state = _state(declaration, newest, completed is not None, environment)
            moved = completed is not None and checksum_moved(declaration, completed["checksum"])
            rows.append(
                {
                    "name": declaration["name"],
                    "tenant": scope,
                    "state": state,
                    "runId": None if newest is None else newest["runId"],
                    "rowsProcessed": None if newest is None else newest["rowsProcessed"],
                    "checksumMoved": moved,
                }
            )
    names = {d["name"] for d in declared}
    unswept = [r["name"] for r in rows if r["state"] in ("pending", "failed")]
    return {
        "environment": environment,
        "rows": rows,
        "pending": list(dict.fromkeys(unswept)),
        "orphaned": sorted(set(by_name) - names),
    }


async def applied_migrations(executor: PgFetch) -> set[str]:
    """The migration ids ``x_migrations`` records (what ``requires`` is checked against)."""
    return {row["id"] for row in await executor.fetch(_APPLIED)}


def gate_backfill(
    definition: BackfillDefinition, *, environment: str | None, applied: set[str] | None
) -> None:
    """The CLI's pre-check: the environment rail, then ``requires`` against ``applied``."""
    check_environment(definition, environment)
    if definition.requires is not None and (applied is None or definition.requires not in applied):
        raise BackfillMigrationPendingError(
            f"backfill {definition.name!r} requires migration {definition.requires!r}, which is "
            "not applied; run the migration first",
            meta={"backfill": definition.name, "requires": definition.requires},
        )
