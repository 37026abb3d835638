"""The dashboard's read-only pages, each over the function the CLI and ``/v1`` call.

| Page | Reads | Who |
|---|---|---|
| ``/_x/queues`` | ``inspect_queues`` + a throughput sparkline from ``counters`` | operator |
| ``/_x/jobs`` | ``list_jobs`` (filters, keyset pages both ways, id or short-id search) | any; a tenant sees its own |
| ``/_x/jobs/{id}`` | ``job_document`` (input redacted like ``ujobs jobs show``; a tenant reads the last error without its stack) | any; another tenant's is 404 |
| ``/_x/dead`` | ``list_jobs`` over ``dead`` | any; a tenant sees its own |
| ``/_x/workers`` | ``list_workers`` | operator |
| ``/_x/tasks`` | ``task_rows`` (last and next fire, paused) | operator |
"""  # noqa: E501

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import orjson
from aiohttp import web

from ujobs.drivers.base import (
    ALL_STATES,
    MAX_JOB_PAGE,
    JobDriver,
    JobFilter,
    JobRow,
    JobState,
    job_cursor,
)
from ujobs.errors import InputInvalidError, JobNotFoundError, JobPageInvalidError
from ujobs.introspect import (
    get_job,
    inspect_queue,
    inspect_queues,
    introspection_of,
    job_document,
    job_json,
    list_workers,
)
from ujobs.jobs.declaration_rules import NAME_PATTERN
from ujobs.services.api.auth import Principal
from ujobs.services.api.common import EDGE, REGISTRY
from ujobs.services.api.task_rows import fires_and_pauses, task_rows
from ujobs.services.cli.jobs_common import first_line, progress_text
from ujobs.services.dashboard.render import page
from ujobs.services.dashboard.session import PREFIX, viewer
from ujobs.services.dashboard.views import flash, guarded

routes = web.RouteTableDef()

PAGE_SIZE = 25
SPARK_MINUTES = 60
SPARK_WIDTH = 120
SPARK_HEIGHT = 24
FINISHED_STATES = ("done", "failed", "dead", "cancelled")
LIVE_STATES = ("ready", "delayed", "running", "suspended")


# --- queues ---------------------------------------------------------------------------------


async def throughput(request: web.Request, now_ms: int) -> list[dict[str, Any]]:
    """Per job name (the counters' key: a job may run on any queue), the settles of each of
    the last ``SPARK_MINUTES`` minutes from the 1-minute counter buckets, oldest first, and
    the window's totals."""
    introspect = introspection_of(request.app[EDGE].driver)
    start = (now_ms // 60_000 - SPARK_MINUTES + 1) * 60_000
    rows = []
    for totals in sorted(await introspect.counter_totals(start), key=lambda t: t.job):
        slots = [0] * SPARK_MINUTES
        for bucket in await introspect.counters(totals.job, start):
            index = (bucket.bucket_start_ms - start) // 60_000
            if 0 <= index < SPARK_MINUTES:
                slots[index] += bucket.done + bucket.failed + bucket.dead
        rows.append(
            {
                "job": totals.job,
                "spark": sparkline(slots),
                "finished": totals.done + totals.failed + totals.dead,
                "done": totals.done,
                "retried": totals.retried,
                "failed": totals.failed,
                "dead": totals.dead,
                "meanMs": totals.duration_ms // totals.done if totals.done else None,
            }
        )
    return rows


def sparkline(values: list[int]) -> str:
    """An SVG polyline's points for ``values`` in a ``SPARK_WIDTH`` x ``SPARK_HEIGHT`` box."""
    top = max(values) or 1
    step = SPARK_WIDTH / max(1, len(values) - 1)
    return " ".join(
        f"{i * step:.1f},{SPARK_HEIGHT - 1 - (v / top) * (SPARK_HEIGHT - 2):.1f}"
        for i, v in enumerate(values)
    )


@routes.get(PREFIX + "/queues")
@guarded
async def queues(request: web.Request) -> web.Response:
    principal, secret = await viewer(request)
    principal.require_operator("the queues page")
    driver = request.app[EDGE].driver
    now_ms = driver.clock.now_ms()
    rows = await inspect_queues(driver, now_ms)
    return page(
        request,
        "queues.html",
        principal=principal,
        secret=secret,
        queues=rows,
        throughput=await throughput(request, now_ms),
        now_ms=now_ms,
        spark=(SPARK_WIDTH, SPARK_HEIGHT, SPARK_MINUTES),
        flash=flash(request),
    )


@routes.get(PREFIX + "/queues/{queue:.+}")
@guarded
async def queue_page(request: web.Request) -> web.Response:
    """One queue: its counts and whose due work waits in it (``ujobs queues show``): the
    tenants with the most due jobs. An operator's page, as the queues list is."""
    principal, secret = await viewer(request)
    principal.require_operator("the queue page")
    name = request.match_info["queue"]
    if not NAME_PATTERN.fullmatch(name):
        raise InputInvalidError(
            f"queue name {name!r} must be 1-200 characters of letters, digits and _ . : / -",
            meta={"issues": [{"path": "queue", "message": "queue name"}]},
        )
    driver = request.app[EDGE].driver
    shown = await inspect_queue(driver, name, driver.clock.now_ms())
    return page(request, "queue.html", principal=principal, secret=secret, q=shown)


# --- jobs -----------------------------------------------------------------------------------


def _state(raw: str | None) -> JobState | None:
    if not raw:
        return None
    for state in ALL_STATES:
        if state == raw:
            return state
    raise InputInvalidError(
        f"state must be one of {', '.join(ALL_STATES)}",
        meta={"issues": [{"path": "state", "message": "state"}]},
    )


def _filter(query: Mapping[str, str], principal: Principal, state: JobState | None) -> JobFilter:
    """The page's query as the CLI's ``JobFilter``; a tenant token's tenant is its own."""
    tenant = (query.get("tenant") or None) if principal.operator else principal.tenant_id
    search = (query.get("q") or "").strip().lower()
    raw_limit = query.get("limit") or str(PAGE_SIZE)
    if not (raw_limit.isascii() and raw_limit.isdigit()) or not 0 < int(raw_limit) < MAX_JOB_PAGE:
        raise JobPageInvalidError(
            f"limit must be a whole number from 1 to {MAX_JOB_PAGE - 1}",
            meta={"limit": raw_limit, "max": MAX_JOB_PAGE - 1},
        )
    return JobFilter(
        queue=query.get("queue") or None,
        name=query.get("name") or None,
        state=state,
        tenant_id=tenant,
        id_prefix=search or None,
        limit=int(raw_limit),
        after=query.get("after") or None,
        before=query.get("before") or None,
    )


def row_view(row: JobRow) -> dict[str, Any]:
    """A list's row: of the last error only its first line (never the stack), for anyone."""
    job = job_json(row, error_detail=False)
    return {**job, "error": first_line(row.last_error), "progressText": progress_text(row.progress)}


async def one_page(driver: JobDriver, flt: JobFilter) -> tuple[list[JobRow], bool, bool]:
    """``flt``'s rows, newest first, and whether newer and older rows exist: one row more than
    the page is read, so the last page in either direction offers no link past it."""
    wider = dataclasses.replace(flt, limit=flt.limit + 1)
    rows = (await introspection_of(driver).list(wider)).rows
    more = len(rows) > flt.limit
    if flt.before is not None:
        # Paging back: the extra row is the newest one, at the top.
        return rows[-flt.limit :] if more else rows, more, True
    return rows[: flt.limit], flt.after is not None, more


def pager(
    request: web.Request, keep: dict[str, str], rows: list[JobRow], newer: bool, older: bool
) -> tuple[str | None, str | None]:
    """The newer and older pages' links: keyset cursors at this page's first and last rows."""

    def link(**cursor: str) -> str:
        return str(request.rel_url.with_query({**keep, **cursor}))

    if not rows:
        return (link() if newer else None), None
    return (
        link(before=job_cursor(rows[0])) if newer else None,
        link(after=job_cursor(rows[-1])) if older else None,
    )


async def _job_list(request: web.Request, template: str, state: JobState | None) -> web.Response:
    principal, secret = await viewer(request)
    query = request.query
    search = (query.get("q") or "").strip()
    driver = request.app[EDGE].driver
    if search and not query.get("after") and not query.get("before"):
        # A whole id goes straight to its page (when this token may see it).
        try:
            found = await get_job(driver, search)
        except JobNotFoundError:
            found = None
        if found is not None and principal.sees(found.tenant_id):
            raise web.HTTPSeeOther(f"{PREFIX}/jobs/{found.id}")
    flt = _filter(query, principal, state)
    rows, has_newer, has_older = await one_page(driver, flt)
    keep = {k: v for k, v in query.items() if k not in ("after", "before", "done") and v}
    newer, older = pager(request, keep, rows, has_newer, has_older)
    return page(
        request,
        template,
        principal=principal,
        secret=secret,
        jobs=[row_view(r) for r in rows],
        query=keep,
        states=ALL_STATES,
        newer=newer,
        older=older,
        first=str(request.rel_url.with_query(keep)) if flt.after or flt.before else None,
        flash=flash(request),
    )


@routes.get(PREFIX + "/jobs")
@guarded
async def jobs(request: web.Request) -> web.Response:
    return await _job_list(request, "jobs.html", _state(request.query.get("state")))


@routes.get(PREFIX + "/dead")
@guarded
async def dead(request: web.Request) -> web.Response:
    return await _job_list(request, "dead.html", "dead")


async def visible_job(request: web.Request, principal: Principal, job_id: str) -> JobRow:
    """The job if this token may see it; another tenant's is the same 404 as no job."""
    try:
        row = await get_job(request.app[EDGE].driver, job_id)
    except JobNotFoundError:
        row = None
    if row is None or not principal.sees(row.tenant_id):
        raise JobNotFoundError(
            f"no job has the id {job_id!r}; search for it on the jobs page", meta={"id": job_id}
        )
    return row


def timeline(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each step's bar (x and width out of 100) on the span from the first start to the last
    finish."""
    if not steps:
        return []
    start = min(s["startedAtMs"] for s in steps)
    end = max(s["finishedAtMs"] for s in steps)
    total = max(1, end - start)
    return [
        {
            **s,
            "x": round((s["startedAtMs"] - start) / total * 100, 2),
            "w": max(0.5, round(s["durationMs"] / total * 100, 2)),
        }
        for s in steps
    ]


@routes.get(PREFIX + "/jobs/{job}")
@guarded
async def job(request: web.Request) -> web.Response:
    principal, secret = await viewer(request)
    row = await visible_job(request, principal, request.match_info["job"])
    driver = request.app[EDGE].driver
    # An operator sees each step's output (collapsed on the page); a tenant sees its steps' names
    # and times only, as ``ujobs jobs show`` without ``--show-output``.
    doc = await job_document(
        driver, row, error_detail=principal.operator, show_output=principal.operator
    )
    outputs = (
        {
            s["name"]: orjson.dumps(s["output"], option=orjson.OPT_INDENT_2).decode()
            for s in doc["steps"]
        }
        if principal.operator
        else None
    )
    now_ms = driver.clock.now_ms()
    return page(
        request,
        "job.html",
        principal=principal,
        secret=secret,
        job=doc,
        input_json=orjson.dumps(doc["input"], option=orjson.OPT_INDENT_2).decode(),
        result_json=(
            None
            if doc["result"] is None
            else orjson.dumps(doc["result"], option=orjson.OPT_INDENT_2).decode()
        ),
        progress=progress_text(row.progress),
        steps=timeline(doc["steps"]),
        retryable=row.state in FINISHED_STATES,
        cancellable=row.state in LIVE_STATES,
        removable=row.state != "running",
        outputs=outputs,
        promotable=row.state in ("delayed", "ready") and row.run_at_ms > now_ms,
        flash=flash(request),
    )


# --- workers and tasks ---------------------------------------------------------------------


@routes.get(PREFIX + "/workers")
@guarded
async def workers(request: web.Request) -> web.Response:
    principal, secret = await viewer(request)
    principal.require_operator("the workers page")
    driver = request.app[EDGE].driver
    return page(
        request,
        "workers.html",
        principal=principal,
        secret=secret,
        workers=await list_workers(driver),
        now_ms=driver.clock.now_ms(),
    )


@routes.get(PREFIX + "/tasks")
@guarded
async def tasks(request: web.Request) -> web.Response:
    principal, secret = await viewer(request)
    principal.require_operator("the tasks page")
    driver = request.app[EDGE].driver
    fires, paused = await fires_and_pauses(driver)
    handles = list(request.app[REGISTRY].tasks.values())
    return page(
        request,
        "tasks.html",
        principal=principal,
        secret=secret,
        tasks=task_rows(handles, fires, paused, driver.clock.now_ms()),
        flash=flash(request),
    )


__all__ = [
    "PAGE_SIZE",
    "one_page",
    "pager",
    "routes",
    "row_view",
    "sparkline",
    "throughput",
    "timeline",
    "visible_job",
]
