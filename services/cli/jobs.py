"""``ujobs jobs list | show | retry | cancel | remove | promote``: the operator surface.

``list`` and ``show`` also work against a remote api (``UJOBS_URL`` + ``UJOBS_TOKEN`` with
``DATABASE_URL`` unset: ``ujobs.services.cli.remote``), reading ``GET /v1/jobs`` and
``GET /v1/jobs/{id}`` under the token's tenancy.

Every command reads and moves rows only through ``ujobs.introspect`` (``driver.introspect``),
takes ``--json``, and names its ``X_…`` code on failure. This module holds ``list`` and
``show``; the moves (``retry``, ``cancel``, ``remove``, ``promote``) are ``cli.jobs_move``.

``show`` prints the input's keys with the values masked unless ``--show-input``, and never a
step's output unless ``--show-output`` (see ``ujobs.introspect``).
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote

import typer

from ujobs.clock import SYSTEM_CLOCK
from ujobs.drivers.base import DEFAULT_JOB_PAGE, MAX_JOB_PAGE, JobFilter
from ujobs.errors import JobIdAmbiguousError, JobNotFoundError
from ujobs.introspect import (
    AMBIGUOUS_LISTED,
    FULL_ID_LENGTH,
    inspect_job,
    list_jobs,
    resolve_job_id,
)
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
from ujobs.services.cli.remote import Remote, remote_get
from ujobs.services.config.parse import invalid
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
    """One page of jobs, newest first. Without DATABASE_URL it asks the api at UJOBS_URL
    (a token with read; a tenant token lists its tenant's jobs only)."""

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

    def remote(target: Remote) -> dict[str, Any]:
        _remote_refuses(created_from=created_from, created_to=created_to)
        query = {
            "queue": queue,
            "name": name,
            "state": parse_state(state),
            "tenantId": tenant,
            "idPrefix": id_prefix,
            "limit": str(limit),
            "after": after,
            "before": before,
        }
        page: dict[str, Any] = remote_get(target, "/v1/jobs", query)
        return {**page, "nowMs": SYSTEM_CLOCK.now_ms()}

    page = operate(
        work,
        as_json=as_json,
        label="listing jobs",
        database_url=database_url,
        driver=driver,
        remote=remote,
    )
    if as_json:
        page.pop("nowMs")
        emit_json(page)
        return
    now = page["nowMs"]
    print_table(
        (
            "ID",
            "NAME",
            "QUEUE",
            "PRI",
            "STATE",
            "ATTEMPT",
            "CREATED",
            "RUN AT",
            "PROGRESS",
            "LAST ERROR",
        ),
        [
            (
                j["id"],
                j["name"],
                j["queue"],
                str(j["priority"]),
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
    note_in_flight(page.get("backfills", []))


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
    (values redacted, the result's too, unless --show-input / --show-output). Without
    DATABASE_URL it asks the api at UJOBS_URL (a token with read)."""

    async def work(backend: Backend, _: Progress) -> dict[str, Any]:
        full_id = await resolve_job_id(backend.driver, job_id)
        doc = await inspect_job(
            backend.driver, full_id, show_input=show_input, show_output=show_output
        )
        doc["backfill"] = await backfill_of_run(backend.driver, doc["name"], doc["runId"])
        return {**doc, "nowMs": backend.driver.clock.now_ms()}

    def remote(target: Remote) -> dict[str, Any]:
        _remote_refuses(show_input=show_input, show_output=show_output)
        full_id = _remote_job_id(target, job_id)
        doc: dict[str, Any] = remote_get(target, f"/v1/jobs/{quote(full_id, safe='')}")
        return {**doc, "nowMs": SYSTEM_CLOCK.now_ms()}

    doc = operate(
        work,
        as_json=as_json,
        label=f"reading job {job_id}",
        database_url=database_url,
        driver=driver,
        remote=remote,
    )
    now = doc.pop("nowMs")
    if as_json:
        emit_json(doc)
        return
    _print_job(doc, now, show_input=show_input, show_output=show_output)


def _remote_refuses(**flags: object) -> None:
    """The flags the api's routes cannot answer (it never shows a job's input values or its
    steps' outputs, and has no created-at filter): refused rather than silently ignored."""
    for name, value in flags.items():
        if value:
            flag = "--" + name.replace("_", "-")
            raise invalid(
                flag,
                "the api (UJOBS_URL) does not answer it; set DATABASE_URL to read the database",
            )


def _remote_job_id(target: Remote, given: str) -> str:
    """``resolve_job_id`` over HTTP: a shorter id is the one job whose id starts with it."""
    text = given.strip()
    if len(text) >= FULL_ID_LENGTH or not text:
        return text
    page = remote_get(target, "/v1/jobs", {"idPrefix": text, "limit": str(AMBIGUOUS_LISTED + 1)})
    jobs = page["jobs"]
    if not jobs:
        raise JobNotFoundError(
            f"no job's id starts with {text!r}; find it with `ujobs jobs list --json`",
            meta={"id": text},
        )
    if len(jobs) > 1:
        listed = jobs[:AMBIGUOUS_LISTED]
        more = " and more" if len(jobs) > AMBIGUOUS_LISTED else ""
        raise JobIdAmbiguousError(
            f"{text!r} starts {len(listed)}{more} job ids: "
            + ", ".join(f"{j['id']} ({j['name']})" for j in listed)
            + "; give more of the id",
            meta={"id": text, "matches": [j["id"] for j in listed]},
        )
    return str(jobs[0]["id"])


def _print_job(doc: dict[str, Any], now: int, *, show_input: bool, show_output: bool) -> None:
    import orjson

    print_fields(
        [
            ("id", doc["id"]),
            ("run id", doc["runId"]),
            ("name", doc["name"]),
            ("queue", doc["queue"]),
            ("priority", str(doc["priority"])),
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
            ("parent", doc.get("parentId")),
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
    if doc["attempts"]:
        typer.echo(f"attempt errors ({len(doc['attempts'])}, oldest first)")
        for a in doc["attempts"]:
            typer.echo(
                f"  attempt {a['attempt']} ({when(a['atMs'], now)}): {first_line(a['error'])}"
            )
    _print_children(doc.get("children"), now)
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


def _print_children(children: dict[str, Any] | None, now: int) -> None:
    """The job's children (the first ones and the count), when it has any."""
    if not children or not children["total"]:
        return
    items = children["items"]
    shown = f", the first {len(items)}" if len(items) < children["total"] else ""
    typer.echo(f"children ({children['total']}{shown})")
    print_table(
        ["ID", "NAME", "STATE", "CREATED"],
        [[c["id"], c["name"], c["state"], when(c["createdAtMs"], now)] for c in items],
    )


def _backfill_text(row: dict[str, Any] | None) -> str | None:
    if row is None:
        return None
    scope = f"tenant {row['tenant']}, " if row["tenant"] is not None else ""
    return f"{row['status']}, {scope}{row['rowsProcessed']} rows, cursor {row['lastCursor']}"


jobs_app.command("retry")(jobs_retry)
jobs_app.command("cancel")(jobs_cancel)
jobs_app.command("remove")(jobs_remove)
jobs_app.command("promote")(jobs_promote)
