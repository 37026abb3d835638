"""``ujobs db backfill``: the ledger, what is unswept, and putting a sweep on the queue.

    ujobs db backfill --list [--name N] [--status S] [--limit L]   the ledger, newest pass first
    ujobs db backfill --pending [--tenant T]     declared minus completed; exit 3 (and
                                                 X_BACKFILL_PENDING) when any is
    ujobs db backfill NAME                       DRY RUN: the gate, the ledger, what it would touch
    ujobs db backfill NAME --write [--force]     gate, then enqueue; the workers sweep (--force
                                                 while a pass is live: X_BACKFILL_RUNNING)
    ujobs db backfill --all --write              every pending one, isolated per name
    ujobs db backfill NAME --write --follow      … and follow the pass (rows, rate, ETA)

``--write`` ENQUEUES; it never runs the pass inline (the queue is a job's execution surface),
so a deploy's backfill step puts the sweeps on the queue and exits. The declarations come from
the app (``--app`` / ``UJOBS_APP``); the gate is the pass's own environment rail
(``UJOBS_ENVIRONMENT``) and ``requires`` against ``x_migrations``. ``--all`` continues past a
failure and exits 1 if any name failed.

A completed pass completes its own scope only: the whole of a ``tenant="none"`` backfill, or
one org of a tenant-scoped one. ``--pending`` lists a row per name and org the ledger names;
``--tenant ORG`` asks about that org (an org with no row is pending), for ``--pending``,
``--all`` and the dry run's "completed by".
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from typing import Annotated, Any, cast

import typer

from ujobs.backfill.declare import BackfillDefinition
from ujobs.backfill.ledger_view import (
    applied_migrations,
    backfill_named,
    gate_backfill,
    inspect_backfills,
    pending_backfills,
)
from ujobs.backfill.pass_run import dry_count
from ujobs.drivers.base import BackfillStatus, JobDriver, require_backfills
from ujobs.errors import (
    BackfillAppliedError,
    BackfillPendingError,
    BackfillRunningError,
    InvariantError,
    UltimateError,
)
from ujobs.jobs.app_context import AppContext, open_app_context
from ujobs.jobs.job import JobHandle
from ujobs.services.cli.common import AppOption, DatabaseUrlOption, JsonOption, operate
from ujobs.services.config.settings import environment, read_common
from ujobs.services.runtime.app_loader import load_api
from ujobs.services.runtime.backends import Backend
from ujobs.services.runtime.output import (
    Progress,
    emit_json,
    note,
    print_fields,
    print_table,
    reported,
)

EXIT_PENDING = 3
FOLLOW_POLL_S = 1.0

NameArgument = Annotated[str | None, typer.Argument(help="the backfill's name", show_default=False)]


def backfill_command(
    name: NameArgument = None,
    list_: Annotated[bool, typer.Option("--list", help="the whole ledger")] = False,
    pending: Annotated[
        bool, typer.Option("--pending", help=f"what is unswept; exit {EXIT_PENDING} if any")
    ] = False,
    write: Annotated[bool, typer.Option("--write", help="enqueue (without: a dry run)")] = False,
    all_: Annotated[bool, typer.Option("--all", help="every pending backfill")] = False,
    force: Annotated[bool, typer.Option("--force", help="sweep a completed one again")] = False,
    follow: Annotated[
        bool, typer.Option("--follow", help="after --write, show the pass until it ends")
    ] = False,
    only: Annotated[str | None, typer.Option("--name", help="--list: one name")] = None,
    status: Annotated[str | None, typer.Option("--status", help="--list: one status")] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, help="--list: at most")] = 100,
    tenant: Annotated[
        str | None,
        typer.Option("--tenant", help="one org's scope of a tenant-scoped backfill"),
    ] = None,
    app_spec: AppOption = None,
    database_url: DatabaseUrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """The backfill ledger and its sweeps (a dry run unless --write)."""
    modes = [list_, pending, all_, name is not None]
    if sum(modes) != 1:
        _usage("give exactly one of NAME, --list, --pending or --all", as_json)
    if all_ and not write:
        _usage("--all only writes: ujobs db backfill --all --write (see --pending first)", as_json)
    if status is not None and status not in ("running", "completed", "failed"):
        _usage("--status is running, completed or failed", as_json)
    app_context: AppContext | None = None
    with reported(as_json=as_json):
        common = read_common(environment(), "db backfill", app=app_spec)
        if not list_:
            # importing the app declares its backfills; its context= is what a pass's run.ctx is
            app_context = load_api(common.app).context
    env_name = common.environment
    if list_:
        _list(only, cast("BackfillStatus | None", status), limit, database_url, as_json)
    elif pending:
        _pending(env_name, tenant, database_url, as_json)
    elif all_:
        _all(env_name, tenant, force, database_url, as_json)
    else:
        assert name is not None
        _one(name, env_name, tenant, write, force, follow, database_url, as_json, app_context)


def _usage(message: str, as_json: bool) -> None:
    from ujobs.services.runtime.output import fail

    fail(InvariantError(f"ujobs db backfill: {message}"), as_json=as_json, exit_code=2)


# --- --list and --pending ---------------------------------------------------------------------


def _list(
    name: str | None,
    status: BackfillStatus | None,
    limit: int,
    database_url: str | None,
    as_json: bool,
) -> None:
    async def work(backend: Backend, _progress: Progress) -> list[dict[str, Any]]:
        ledger = require_backfills(backend.driver)
        return await inspect_backfills(ledger, name=name, status=status, limit=limit)

    rows = operate(work, as_json=as_json, label="reading the ledger", database_url=database_url)
    if as_json:
        emit_json({"backfills": rows})
        return
    if not rows:
        note("the backfill ledger is empty")
    print_table(
        ["NAME", "TENANT", "STATUS", "ROWS", "CURSOR", "RUN", "STARTED", "COMPLETED"],
        [
            (
                r["name"],
                r["tenant"] or "*",
                r["status"],
                r["rowsProcessed"],
                r["lastCursor"],
                r["runId"],
                _iso(r["startedAtMs"]),
                _iso(r["completedAtMs"]),
            )
            for r in rows
        ],
    )


def _iso(ms: int | None) -> str | None:
    from ujobs.services.runtime.output import iso

    return iso(ms)


def _pending(
    env_name: str | None, tenant: str | None, database_url: str | None, as_json: bool
) -> None:
    async def work(backend: Backend, _progress: Progress) -> dict[str, Any]:
        ledger = require_backfills(backend.driver)
        runs = await inspect_backfills(ledger, limit=10_000)
        return pending_backfills(runs=runs, environment=env_name, tenant=tenant)

    answer = operate(work, as_json=as_json, label="reading the ledger", database_url=database_url)
    unswept = _unswept(answer["pending"])
    if unswept is not None:
        answer["error"] = unswept.to_dict()
    if as_json:
        emit_json(answer)
    else:
        print_table(
            ["NAME", "TENANT", "STATE", "ROWS", "RUN", "CHECKSUM"],
            [
                (
                    r["name"],
                    r["tenant"] or "*",
                    r["state"],
                    r["rowsProcessed"],
                    r["runId"],
                    "moved" if r["checksumMoved"] else None,
                )
                for r in answer["rows"]
            ],
        )
        if answer["orphaned"]:
            note(f"in the ledger but declared nowhere: {', '.join(answer['orphaned'])}")
        if unswept is not None:
            note(f"{unswept.code}: {unswept.message}")
    if unswept is not None:
        raise typer.Exit(code=EXIT_PENDING)


def _unswept(pending: list[str]) -> BackfillPendingError | None:
    """What ``--pending`` exits 3 with: the declared backfills not yet swept (or failed)."""
    if not pending:
        return None
    return BackfillPendingError(
        f"unswept: {', '.join(pending)}; `ujobs db backfill --all --write` enqueues them",
        meta={"pending": pending},
    )


# --- one name: dry run or --write ---------------------------------------------------------------


async def _gate(
    backend: Backend, definition: BackfillDefinition, env_name: str | None
) -> set[str] | None:
    applied = None
    if definition.requires is not None:
        applied = await applied_migrations(backend.require_pool("requires="))
    gate_backfill(definition, environment=env_name, applied=applied)
    return applied


async def _completed(
    backend: Backend, definition: BackfillDefinition, tenant: str | None
) -> dict[str, Any] | None:
    """The newest completed pass in the scope a pass would ask about: the unscoped one for
    ``tenant="none"``, ``tenant``'s for a scoped backfill (none when no org is named)."""
    if definition.tenant != "none" and tenant is None:
        return None
    scope = None if definition.tenant == "none" else tenant
    ledger = require_backfills(backend.driver)
    rows = await inspect_backfills(ledger, name=definition.name, status="completed", limit=10_000)
    return next((r for r in rows if r["tenant"] == scope), None)


async def _would_touch(
    handle: JobHandle[Any],
    definition: BackfillDefinition,
    tenant: str | None,
    app_context: AppContext | None,
) -> int | None:
    """``count`` as the pass would call it: with the ctx ``ujobs worker`` hands every run (the
    app's ``define_api(context=)``, opened for the count and closed after it; None without
    one), under the actor of the org the pass is for (``--tenant``, else the one ``--write``
    would queue it for)."""
    if tenant is None and definition.tenant != "none":
        tenant = handle.request({}).tenant_id
    async with contextlib.AsyncExitStack() as stack:
        ctx = await open_app_context(stack, app_context)
        return await dry_count(definition, ctx, tenant)


async def _enqueue(
    backend: Backend,
    handle: JobHandle[Any],
    definition: BackfillDefinition,
    env_name: str | None,
    force: bool,
) -> dict[str, Any]:
    await _gate(backend, definition, env_name)
    request = handle.request({"force": True} if force else {})
    if not force:
        done = await _completed(backend, definition, request.tenant_id)
        if done is not None:
            raise BackfillAppliedError(
                f"backfill {definition.name!r} was swept by run {done['runId']}; add --force "
                "to sweep it again (into a new ledger row)",
                meta={"backfill": definition.name, "runId": done["runId"]},
            )
    enqueued = await backend.driver.enqueue(request)
    if force and enqueued.deduped:
        # The live pass holds the name's key, so the forced sweep was not queued: say so rather
        # than answer "already queued" for a rerun that will not happen.
        raise BackfillRunningError(
            f"backfill {definition.name!r} is in flight (job {enqueued.id}); --force sweeps it "
            "again into a new ledger row once that pass ends",
            meta={"backfill": definition.name, "id": enqueued.id, "runId": enqueued.run_id},
        )
    return {
        "name": definition.name,
        "force": force,
        "enqueued": {"id": enqueued.id, "runId": enqueued.run_id, "deduped": enqueued.deduped},
    }


def _one(
    name: str,
    env_name: str | None,
    tenant: str | None,
    write: bool,
    force: bool,
    follow: bool,
    database_url: str | None,
    as_json: bool,
    app_context: AppContext | None = None,
) -> None:
    handle, definition = _named(name, as_json)

    async def dry(backend: Backend, _progress: Progress) -> dict[str, Any]:
        gate: dict[str, Any] = {"ok": True}
        try:
            await _gate(backend, definition, env_name)
        except UltimateError as exc:
            gate = {"ok": False, "error": exc.to_dict()}
        done = await _completed(backend, definition, tenant)
        return {
            "name": name,
            "dryRun": True,
            "gate": gate,
            "completedBy": None if done is None else done["runId"],
            "wouldTouch": await _would_touch(handle, definition, tenant, app_context),
            "batch": definition.batch,
            "rate": definition.rate,
        }

    async def enqueue(backend: Backend, _progress: Progress) -> dict[str, Any]:
        return await _enqueue(backend, handle, definition, env_name, force)

    if not write:
        answer = operate(dry, as_json=as_json, label="dry run", database_url=database_url)
        if as_json:
            emit_json(answer)
            return
        print_fields(
            [
                ("backfill", name),
                ("gate", "ok" if answer["gate"]["ok"] else answer["gate"]["error"]["code"]),
                ("completed by", answer["completedBy"]),
                ("would touch", answer["wouldTouch"] if definition.count else "unknown (no count)"),
                ("batch / rate", f"{definition.batch} rows, {definition.rate}/s"),
            ]
        )
        note("a dry run: nothing was queued; add --write to enqueue the pass")
        return
    answer = operate(enqueue, as_json=as_json, label="enqueueing", database_url=database_url)
    if follow:
        answer["final"] = _follow(answer, handle, definition, database_url, as_json, app_context)
    if as_json:
        emit_json(answer)
        return
    queued = answer["enqueued"]
    verb = "already queued as" if queued["deduped"] else "enqueued"
    typer.echo(f"{name}: {verb} job {queued['id']} (run {queued['runId']})")


def _named(name: str, as_json: bool) -> tuple[JobHandle[Any], BackfillDefinition]:
    with reported(as_json=as_json):
        return backfill_named(name)
    raise AssertionError("unreachable: reported() exits on every error")


# --- --all --write ------------------------------------------------------------------------------


def _all(
    env_name: str | None, tenant: str | None, force: bool, database_url: str | None, as_json: bool
) -> None:
    async def work(backend: Backend, progress: Progress) -> list[dict[str, Any]]:
        ledger = require_backfills(backend.driver)
        runs = await inspect_backfills(ledger, limit=10_000)
        todo = pending_backfills(runs=runs, environment=env_name, tenant=tenant)["pending"]
        results: list[dict[str, Any]] = []
        for name in todo:
            progress.update(f"enqueueing {name}")
            try:  # isolated per name: one wedged cleanup never blocks the later ones
                handle, definition = backfill_named(name)
                results.append(await _enqueue(backend, handle, definition, env_name, force))
            except UltimateError as exc:
                results.append({"name": name, "error": exc.to_dict()})
        return results

    results = operate(work, as_json=as_json, label="enqueueing", database_url=database_url)
    if as_json:
        emit_json({"results": results})
    else:
        if not results:
            note("nothing is pending")
        for r in results:
            if "error" in r:
                typer.echo(f"{r['name']}: {r['error']['code']}: {r['error']['message']}")
            else:
                typer.echo(f"{r['name']}: enqueued job {r['enqueued']['id']}")
    if any("error" in r for r in results):
        raise typer.Exit(code=1)


# --- --follow: rows, rate, ETA -------------------------------------------------------------------


def _follow(
    answer: dict[str, Any],
    handle: JobHandle[Any],
    definition: BackfillDefinition,
    database_url: str | None,
    as_json: bool,
    app_context: AppContext | None = None,
) -> dict[str, Any] | None:
    """Poll the pass's ledger row until it ends; a bar on a terminal, nothing otherwise."""
    run_id = answer["enqueued"]["runId"]

    async def work(backend: Backend, _progress: Progress) -> dict[str, Any] | None:
        ledger = require_backfills(backend.driver)
        total = await _would_touch(handle, definition, None, app_context)
        bar = _Bar(definition.name, total) if sys.stderr.isatty() and not as_json else None
        try:
            while True:
                rows = await inspect_backfills(ledger, name=definition.name, run_id=run_id)
                row = rows[0] if rows else None
                if bar is not None and row is not None:
                    bar.show(row["rowsProcessed"])
                if row is not None and row["status"] != "running":
                    return row
                await asyncio.sleep(FOLLOW_POLL_S)
        finally:
            if bar is not None:
                bar.close()

    return operate(work, as_json=as_json, label="following the pass", database_url=database_url)


class _Bar:
    """rows so far, rows a second, and an ETA when ``count`` said how many there are."""

    def __init__(self, name: str, total: int | None) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            TextColumn,
            TimeRemainingColumn,
        )
        from rich.progress import Progress as RichProgress

        self._progress = RichProgress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]} rows/s"),
            TimeRemainingColumn(),
            console=Console(stderr=True),
            transient=False,
        )
        self._task = self._progress.add_task(name, total=total, rate="-")
        self._began = time.monotonic()
        self._progress.start()

    def show(self, rows: int) -> None:
        elapsed = max(time.monotonic() - self._began, 1e-6)
        self._progress.update(self._task, completed=rows, rate=f"{rows / elapsed:,.0f}")

    def close(self) -> None:
        self._progress.stop()


# --- what `ujobs jobs list` and `ujobs jobs show` add -------------------------------------------


async def backfills_in_flight(driver: JobDriver) -> list[dict[str, Any]]:
    """The passes running now (``jobs list``): rows so far and cursor; none without a ledger."""
    return await inspect_backfills(driver.backfills, status="running")


async def backfill_of_run(driver: JobDriver, name: str, run_id: str) -> dict[str, Any] | None:
    """The ledger row of this run (``jobs show``'s ``backfill``), None for any other job."""
    rows = await inspect_backfills(driver.backfills, name=name, run_id=run_id, limit=1_000)
    return rows[0] if rows else None


def note_in_flight(passes: list[dict[str, Any]]) -> None:
    for p in passes:
        scope = f" (tenant {p['tenant']})" if p["tenant"] is not None else ""
        note(
            f"backfill {p['name']}{scope} in flight: {p['rowsProcessed']} rows, "
            f"cursor {p['lastCursor']}"
        )
