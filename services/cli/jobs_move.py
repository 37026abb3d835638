"""``ujobs jobs retry | cancel | remove | promote``: move one job, or a set in batches.

A set (``--state`` with ``--queue`` / ``--name`` / ``--tenant``) is moved ``MAX_BULK_ROWS`` at a
time until none is left, the progress line saying how far it got; removing a set asks for
``--yes``. Registered on ``jobs_app`` by ``cli.jobs``.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ujobs.drivers.base import BulkFilter
from ujobs.errors import UltimateError
from ujobs.introspect import (
    bulk_json,
    bulk_move,
    cancel_job,
    job_json,
    promote_job,
    remove_job,
    resolve_job_id,
    retry_job,
)
from ujobs.services.cli.common import DatabaseUrlOption, DriverOption, JsonOption, operate
from ujobs.services.cli.jobs_common import (
    JobIdArg,
    NameOption,
    QueueOption,
    StateOption,
    TenantOption,
    bulk_filter,
)
from ujobs.services.config.parse import invalid
from ujobs.services.runtime.backends import Backend
from ujobs.services.runtime.output import Progress, emit_json, reported


def _target(job_id: str | None, state: str | None, verb: str) -> None:
    if (job_id is None) == (state is None):
        raise invalid(
            "--state",
            f"{verb} takes a job id, or --state (with --queue/--name/--tenant) for a set — "
            "one of the two",
        )


async def _bulk(
    backend: Backend, progress: Progress, action: str, flt: BulkFilter
) -> dict[str, int]:
    """Call the bulk move until nothing is left (or a call moves nothing: held rows)."""
    total = 0
    while True:
        result = await bulk_move(backend.driver, action, flt)
        total += result.affected
        progress.update(f"{action}: {total} moved, {result.remaining} left")
        if result.remaining == 0 or result.affected == 0:
            return {**bulk_json(result), "affected": total}


def _move_command(
    action: str,
    job_id: str | None,
    flt: BulkFilter | None,
    single: Any,
    *,
    as_json: bool,
    database_url: str | None,
    driver: str | None,
) -> None:
    async def work(backend: Backend, progress: Progress) -> dict[str, Any]:
        if flt is not None:
            return {"bulk": await _bulk(backend, progress, action, flt)}
        assert job_id is not None
        row = await single(backend, await resolve_job_id(backend.driver, job_id))
        return {"job": None if row is None else job_json(row)}

    label = f"{action} {job_id}" if job_id else f"{action} every {flt.state if flt else ''} job"
    doc = operate(work, as_json=as_json, label=label, database_url=database_url, driver=driver)
    if as_json:
        emit_json(doc.get("job") or doc.get("bulk") or {"id": job_id, "removed": True})
        return
    if "bulk" in doc:
        bulk = doc["bulk"]
        typer.echo(f"{action}: {bulk['affected']} jobs moved, {bulk['remaining']} left")
    elif doc["job"] is None:
        typer.echo(f"{action}: {job_id} removed")
    else:
        j = doc["job"]
        typer.echo(f"{action}: {j['id']} ({j['name']}) is {j['state']}")


def jobs_retry(
    job_id: JobIdArg = None,
    from_step: Annotated[
        str | None,
        typer.Option("--from-step", help="drop this step and every later one, so they run again"),
    ] = None,
    state: StateOption = None,
    queue: QueueOption = None,
    name: NameOption = None,
    tenant: TenantOption = None,
    database_url: DatabaseUrlOption = None,
    driver: DriverOption = None,
    as_json: JsonOption = False,
) -> None:
    """Re-queue a finished job (done, failed, dead, cancelled), or every one of a --state."""
    with reported(as_json=as_json):
        _target(job_id, state, "retry")
        if from_step is not None and job_id is None:
            raise invalid("--from-step", "--from-step applies to one job id, not a set")
        flt = bulk_filter(state, queue, name, tenant)

    async def single(backend: Backend, jid: str) -> Any:
        return await retry_job(backend.driver, jid, from_step=from_step)

    _move_command(
        "retry", job_id, flt, single, as_json=as_json, database_url=database_url, driver=driver
    )


def jobs_cancel(
    job_id: Annotated[str, typer.Argument(help="the job's id, or a unique start of it")],
    reason: Annotated[str | None, typer.Option(help="recorded in the job's last error")] = None,
    detach_children: Annotated[
        bool,
        typer.Option(
            "--detach-children", help="keep its live children running (default: cancel them)"
        ),
    ] = False,
    database_url: DatabaseUrlOption = None,
    driver: DriverOption = None,
    as_json: JsonOption = False,
) -> None:
    """Stop a live job, and its live children unless enqueued detached (or --detach-children);
    a running one stops at its next heartbeat."""

    async def single(backend: Backend, jid: str) -> Any:
        return await cancel_job(backend.driver, jid, reason, detach_children=detach_children)

    _move_command(
        "cancel", job_id, None, single, as_json=as_json, database_url=database_url, driver=driver
    )


def jobs_remove(
    job_id: JobIdArg = None,
    state: StateOption = None,
    queue: QueueOption = None,
    name: NameOption = None,
    tenant: TenantOption = None,
    yes: Annotated[bool, typer.Option("--yes", help="confirm removing a set of jobs")] = False,
    database_url: DatabaseUrlOption = None,
    driver: DriverOption = None,
    as_json: JsonOption = False,
) -> None:
    """Delete a job and its steps (never a running one), or every one of a --state."""
    with reported(as_json=as_json):
        _target(job_id, state, "remove")
        flt = bulk_filter(state, queue, name, tenant)
        if flt is not None and not yes:
            raise UltimateError(
                f"removing every {flt.state} job that matches is permanent; add --yes",
                code="X_CONFIRMATION_REQUIRED",
                meta={"state": flt.state},
            )

    async def single(backend: Backend, jid: str) -> Any:
        await remove_job(backend.driver, jid)

    _move_command(
        "remove", job_id, flt, single, as_json=as_json, database_url=database_url, driver=driver
    )


def jobs_promote(
    job_id: JobIdArg = None,
    state: StateOption = None,
    queue: QueueOption = None,
    name: NameOption = None,
    tenant: TenantOption = None,
    database_url: DatabaseUrlOption = None,
    driver: DriverOption = None,
    as_json: JsonOption = False,
) -> None:
    """Make a delayed (or backing-off) job due now, or every one of a --state."""
    with reported(as_json=as_json):
        _target(job_id, state, "promote")
        flt = bulk_filter(state, queue, name, tenant)

    async def single(backend: Backend, jid: str) -> Any:
        return await promote_job(backend.driver, jid)

    _move_command(
        "promote", job_id, flt, single, as_json=as_json, database_url=database_url, driver=driver
    )
