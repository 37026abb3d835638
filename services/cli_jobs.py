"""``ujobs jobs list | show | retry | cancel | remove | promote``: the operator surface.

Every command reads and moves rows only through ``shared.introspect`` (``driver.introspect``),
takes ``--json``, and names its ``X_…`` code on failure. ``retry``, ``remove`` and ``promote``
take one id, or a set (``--state`` with ``--queue`` / ``--name`` / ``--tenant``) that is moved
in batches of ``MAX_BULK_ROWS`` until none is left, showing how far it got.

``show`` prints the input's keys with the values masked unless ``--show-input``, and never a
step's output unless ``--show-output`` (see ``shared.introspect``).
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any

import typer

from services.backends import Backend
from services.cli_common import DatabaseUrlOption, DriverOption, JsonOption, operate
from services.cli_output import (
    Progress,
    duration,
    emit_json,
    iso,
    note,
    print_fields,
    print_table,
    reported,
    when,
)
from services.config_parse import choice, invalid
from shared.drivers.base import (
    ALL_STATES,
    DEFAULT_JOB_PAGE,
    MAX_JOB_PAGE,
    BulkFilter,
    JobFilter,
    JobState,
)
from shared.errors import UltimateError
from shared.introspect import (
    bulk_json,
    bulk_move,
    cancel_job,
    inspect_job,
    job_json,
    list_jobs,
    promote_job,
    remove_job,
    retry_job,
)

jobs_app = typer.Typer(help="List, inspect and move jobs.", no_args_is_help=True)

QueueOption = Annotated[str | None, typer.Option("--queue", "-q", help="only this queue")]
NameOption = Annotated[str | None, typer.Option("--name", "-n", help="only this job name")]
StateOption = Annotated[
    str | None, typer.Option("--state", "-s", help=f"one of {', '.join(ALL_STATES)}")
]
TenantOption = Annotated[str | None, typer.Option("--tenant", help="only this tenant id")]
JobIdArg = Annotated[str | None, typer.Argument(help="the job's id", show_default=False)]
ERROR_WIDTH = 60


def _state(raw: str | None, flag: str = "--state") -> JobState | None:
    if raw is None:
        return None
    value = choice(flag, raw, ALL_STATES)
    return next(s for s in ALL_STATES if s == value)


def _instant(flag: str, raw: str | None) -> int | None:
    """Epoch milliseconds, or an ISO-8601 instant (``2026-01-02T03:04:05Z``)."""
    if raw is None:
        return None
    text = raw.strip()
    if re.fullmatch(r"\d+", text):
        return int(text)
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise invalid(
            flag, f"{raw!r} is neither epoch milliseconds nor an ISO-8601 instant"
        ) from None
    if parsed.tzinfo is None:
        raise invalid(flag, f"{raw!r} has no timezone; add Z or an offset")
    return int(parsed.timestamp() * 1000)


def _first_line(text: str | None, width: int = ERROR_WIDTH) -> str | None:
    if not text:
        return None
    line = text.strip().splitlines()[0]
    return line if len(line) <= width else line[: width - 1] + "…"


def _progress_text(progress: Any) -> str | None:
    if not isinstance(progress, dict):
        return None if progress is None else str(progress)
    done, total, label = progress.get("done"), progress.get("total"), progress.get("note")
    text = f"{done}/{total}" if total is not None else f"{done}"
    return f"{text} {label}" if label else text


# --- list ---------------------------------------------------------------------------------------


@jobs_app.command("list")
def jobs_list(
    queue: QueueOption = None,
    name: NameOption = None,
    state: StateOption = None,
    tenant: TenantOption = None,
    id_prefix: Annotated[str | None, typer.Option(help="ids starting with this")] = None,
    created_from: Annotated[
        str | None, typer.Option(help="created at or after (ISO-8601 or epoch ms)")
    ] = None,
    created_to: Annotated[
        str | None, typer.Option(help="created at or before (ISO-8601 or epoch ms)")
    ] = None,
    limit: Annotated[
        int, typer.Option(help=f"rows per page, at most {MAX_JOB_PAGE}")
    ] = DEFAULT_JOB_PAGE,
    after: Annotated[str | None, typer.Option(help="the next (older) page's cursor")] = None,
    before: Annotated[str | None, typer.Option(help="the previous (newer) page's cursor")] = None,
    database_url: DatabaseUrlOption = None,
    driver: DriverOption = None,
    as_json: JsonOption = False,
) -> None:
    """One page of jobs, newest first."""

    async def work(backend: Backend, _: Progress) -> dict[str, Any]:
        flt = JobFilter(
            queue=queue,
            name=name,
            state=_state(state),
            tenant_id=tenant,
            id_prefix=id_prefix,
            created_from_ms=_instant("--created-from", created_from),
            created_to_ms=_instant("--created-to", created_to),
            limit=limit,
            after=after,
            before=before,
        )
        return {**await list_jobs(backend.driver, flt), "nowMs": backend.driver.clock.now_ms()}

    page = operate(
        work, as_json=as_json, label="listing jobs", database_url=database_url, driver=driver
    )
    if as_json:
        page.pop("nowMs")
        emit_json(page)
        return
    now = page["nowMs"]
    print_table(
        ("ID", "NAME", "QUEUE", "STATE", "ATTEMPT", "CREATED", "RUN AT", "PROGRESS", "LAST ERROR"),
        [
            (
                j["id"],
                j["name"],
                j["queue"],
                j["state"],
                f"{j['attempt']}/{j['maxAttempts']}",
                when(j["createdAtMs"], now),
                when(j["runAtMs"], now),
                _progress_text(j["progress"]),
                _first_line(j["lastError"]),
            )
            for j in page["jobs"]
        ],
    )
    if not page["jobs"]:
        note("no jobs match")
    elif page["next"] is not None:
        note(f"more: ujobs jobs list --after {page['next']} (same filters)")


# --- show ---------------------------------------------------------------------------------------


@jobs_app.command("show")
def jobs_show(
    job_id: Annotated[str, typer.Argument(help="the job's id")],
    show_input: Annotated[
        bool, typer.Option("--show-input", help="print the input's values, not only its keys")
    ] = False,
    show_output: Annotated[
        bool, typer.Option("--show-output", help="print what each step returned")
    ] = False,
    database_url: DatabaseUrlOption = None,
    driver: DriverOption = None,
    as_json: JsonOption = False,
) -> None:
    """One job: state, attempts, progress, last error, its steps, its input (redacted)."""

    async def work(backend: Backend, _: Progress) -> dict[str, Any]:
        doc = await inspect_job(
            backend.driver, job_id, show_input=show_input, show_output=show_output
        )
        return {**doc, "nowMs": backend.driver.clock.now_ms()}

    doc = operate(
        work,
        as_json=as_json,
        label=f"reading job {job_id}",
        database_url=database_url,
        driver=driver,
    )
    now = doc.pop("nowMs")
    if as_json:
        emit_json(doc)
        return
    _print_job(doc, now, show_input=show_input, show_output=show_output)


def _print_job(doc: dict[str, Any], now: int, *, show_input: bool, show_output: bool) -> None:
    import orjson

    print_fields(
        [
            ("id", doc["id"]),
            ("run id", doc["runId"]),
            ("name", doc["name"]),
            ("queue", doc["queue"]),
            ("state", doc["state"]),
            ("attempt", f"{doc['attempt']} of {doc['maxAttempts']}"),
            ("tenant", doc["tenantId"]),
            ("key", doc["idempotencyKey"]),
            ("created", f"{iso(doc['createdAtMs'])} ({when(doc['createdAtMs'], now)})"),
            ("run at", f"{iso(doc['runAtMs'])} ({when(doc['runAtMs'], now)})"),
            ("finished", iso(doc["finishedAtMs"])),
            ("claimed by", doc["claimedBy"]),
            ("progress", _progress_text(doc["progress"])),
            ("enqueued by", doc["enqueuedBy"]),
            ("input", orjson.dumps(doc["input"]).decode()),
        ]
    )
    if not show_input:
        note("input values are redacted: --show-input prints them")
    if doc["lastError"]:
        typer.echo("last error")
        for line in str(doc["lastError"]).splitlines():
            typer.echo(f"  {line}")
    steps = doc["steps"]
    typer.echo(f"steps ({len(steps)})")
    if steps:
        headers = ["SEQ", "STEP", "TOOK", "FINISHED"] + (["OUTPUT"] if show_output else [])
        rows = []
        for s in steps:
            row = [s["seq"], s["name"], duration(s["durationMs"]), when(s["finishedAtMs"], now)]
            if show_output:
                row.append(orjson.dumps(s["output"]).decode())
            rows.append(row)
        print_table(headers, rows)


# --- single or bulk moves --------------------------------------------------------------------


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
        row = await single(backend, job_id)
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


def _bulk_filter(
    state: str | None, queue: str | None, name: str | None, tenant: str | None
) -> BulkFilter | None:
    chosen = _state(state)
    if chosen is None:
        return None
    return BulkFilter(state=chosen, queue=queue, name=name, tenant_id=tenant)


@jobs_app.command("retry")
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
        flt = _bulk_filter(state, queue, name, tenant)

    async def single(backend: Backend, jid: str) -> Any:
        return await retry_job(backend.driver, jid, from_step=from_step)

    _move_command(
        "retry", job_id, flt, single, as_json=as_json, database_url=database_url, driver=driver
    )


@jobs_app.command("cancel")
def jobs_cancel(
    job_id: Annotated[str, typer.Argument(help="the job's id")],
    reason: Annotated[str | None, typer.Option(help="recorded in the job's last error")] = None,
    database_url: DatabaseUrlOption = None,
    driver: DriverOption = None,
    as_json: JsonOption = False,
) -> None:
    """Stop a live job; a running one stops at its next heartbeat."""

    async def single(backend: Backend, jid: str) -> Any:
        return await cancel_job(backend.driver, jid, reason)

    _move_command(
        "cancel", job_id, None, single, as_json=as_json, database_url=database_url, driver=driver
    )


@jobs_app.command("remove")
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
        flt = _bulk_filter(state, queue, name, tenant)
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


@jobs_app.command("promote")
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
        flt = _bulk_filter(state, queue, name, tenant)

    async def single(backend: Backend, jid: str) -> Any:
        return await promote_job(backend.driver, jid)

    _move_command(
        "promote", job_id, flt, single, as_json=as_json, database_url=database_url, driver=driver
    )
