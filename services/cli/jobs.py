"""``ujobs jobs list | show | retry | cancel | remove | promote``: the operator surface.

Every command reads and moves rows only through ``ujobs.introspect`` (``driver.introspect``),
takes ``--json``, and names its ``X_…`` code on failure. This module holds ``list`` and
``show``; the moves (``retry``, ``cancel``, ``remove``, ``promote``) are ``cli.jobs_move``.

``show`` prints the input's keys with the values masked unless ``--show-input``, and never a
step's output unless ``--show-output`` (see ``ujobs.introspect``).
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ujobs.drivers.base import DEFAULT_JOB_PAGE, MAX_JOB_PAGE, JobFilter
from ujobs.introspect import inspect_job, list_jobs, resolve_job_id
from ujobs.services.cli.backfill import backfill_of_run, backfills_in_flight, note_in_flight
from ujobs.services.cli.common import DatabaseUrlOption, DriverOption, JsonOption, operate
from ujobs.services.cli.jobs_common import (
    NameOption,
    QueueOption,
    StateOption,
    TenantOption,
    first_line,
    parse_instant,
    parse_state,
    progress_text,
)
from ujobs.services.cli.jobs_move import jobs_cancel, jobs_promote, jobs_remove, jobs_retry
from ujobs.services.runtime.backends import Backend
from ujobs.services.runtime.output import (
    Progress,
    duration,
    emit_json,
    iso,
    note,
    print_fields,
    print_table,
    when,
)

jobs_app = typer.Typer(help="List, inspect and move jobs.", no_args_is_help=True)

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
            state=parse_state(state),
            tenant_id=tenant,
            id_prefix=id_prefix,
            created_from_ms=parse_instant("--created-from", created_from),
            created_to_ms=parse_instant("--created-to", created_to),
            limit=limit,
            after=after,
            before=before,
        )
        return {
            **await list_jobs(backend.driver, flt),
            "backfills": await backfills_in_flight(backend.driver),
            "nowMs": backend.driver.clock.now_ms(),
        }

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
                progress_text(j["progress"]),
                first_line(j["lastError"]),
            )
            for j in page["jobs"]
        ],
    )
    if not page["jobs"]:
        note("no jobs match")
    elif page["next"] is not None:
        note(f"more: ujobs jobs list --after {page['next']} (same filters)")
    note_in_flight(page["backfills"])


# --- show ---------------------------------------------------------------------------------------


@jobs_app.command("show")
def jobs_show(
    job_id: Annotated[str, typer.Argument(help="the job's id, or a unique start of it")],
    show_input: Annotated[
        bool, typer.Option("--show-input", help="print the input's values, not only its keys")
    ] = False,
    show_output: Annotated[
        bool,
        typer.Option(
            "--show-output", help="print what each step and the job returned (its result)"
        ),
    ] = False,
    database_url: DatabaseUrlOption = None,
    driver: DriverOption = None,
    as_json: JsonOption = False,
) -> None:
    """One job: state, attempts, progress, last error, its result, its steps, its input
    (values redacted, the result's too, unless --show-input / --show-output)."""

    async def work(backend: Backend, _: Progress) -> dict[str, Any]:
        full_id = await resolve_job_id(backend.driver, job_id)
        doc = await inspect_job(
            backend.driver, full_id, show_input=show_input, show_output=show_output
        )
        doc["backfill"] = await backfill_of_run(backend.driver, doc["name"], doc["runId"])
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
            ("progress", progress_text(doc["progress"])),
            ("enqueued by", doc["enqueuedBy"]),
            ("input", orjson.dumps(doc["input"]).decode()),
            ("result", None if doc["result"] is None else orjson.dumps(doc["result"]).decode()),
            ("backfill", _backfill_text(doc.get("backfill"))),
        ]
    )
    if not show_input:
        note("input values and the idempotency key are redacted: --show-input prints them")
    if doc.get("resultRedacted"):
        note("the result's values are redacted: --show-output prints them")
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


def _backfill_text(row: dict[str, Any] | None) -> str | None:
    if row is None:
        return None
    scope = f"tenant {row['tenant']}, " if row["tenant"] is not None else ""
    return f"{row['status']}, {scope}{row['rowsProcessed']} rows, cursor {row['lastCursor']}"


jobs_app.command("retry")(jobs_retry)
jobs_app.command("cancel")(jobs_cancel)
jobs_app.command("remove")(jobs_remove)
jobs_app.command("promote")(jobs_promote)
