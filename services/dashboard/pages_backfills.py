"""``/_x/backfills``: the ``x_backfills`` ledger beside what the app declares, through the
projection ``ujobs db backfill --list`` and ``--pending`` read (``inspect_backfills``,
``pending_backfills``), so the page cannot report a different number than the CLI.

The ledger has no tenant (a pass sweeps rows of many), so the page needs an operator token,
like the queues page. Each pass links to its job: the pass's job carries the backfill's name
and the pass's run id, so one read of that name's jobs finds it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from aiohttp import web

from ujobs.backfill.declare import checksum_moved, definition_of
from ujobs.backfill.ledger_view import inspect_backfills, pending_backfills
from ujobs.drivers.base import MAX_JOB_PAGE, BackfillStatus, JobDriver, JobFilter
from ujobs.errors import InputInvalidError
from ujobs.introspect import introspection_of
from ujobs.services.api.common import CONFIG, EDGE, REGISTRY
from ujobs.services.dashboard.render import page
from ujobs.services.dashboard.session import PREFIX, viewer
from ujobs.services.dashboard.views import guarded

routes = web.RouteTableDef()

LEDGER_ROWS = 100
STATUSES: tuple[BackfillStatus, ...] = ("running", "completed", "failed")


def declared(request: web.Request) -> list[dict[str, Any]]:
    """The backfills of the app this api serves (``registered_backfills()`` rows)."""
    found = (definition_of(h) for h in request.app[REGISTRY].jobs.values())
    return sorted((d.describe() for d in found if d is not None), key=lambda d: d["name"])


def _status(raw: str | None) -> BackfillStatus | None:
    if not raw:
        return None
    for status in STATUSES:
        if status == raw:
            return status
    raise InputInvalidError(
        f"status must be one of {', '.join(STATUSES)}",
        meta={"issues": [{"path": "status", "message": "status"}]},
    )


PassJobs = dict[tuple[str, str | None, str], str]


async def pass_jobs(driver: JobDriver, names: Iterable[str]) -> PassJobs:
    """``(name, tenant, run id) -> job id`` of the newest jobs of each backfill name (a run id
    is a namespace of its tenant: two orgs' passes under one run id are two jobs); a pass whose
    job was purged has no entry."""
    introspect = introspection_of(driver)
    found: PassJobs = {}
    for name in sorted(set(names)):
        page_ = await introspect.list(JobFilter(name=name, limit=MAX_JOB_PAGE))
        for row in page_.rows:
            found.setdefault((row.name, row.tenant_id, row.run_id), row.id)
    return found


def pass_job(jobs: PassJobs, run: dict[str, Any]) -> str | None:
    """The job of the ledger row ``run``: the one of its scope's tenant. A pass over every
    tenant (scope None) may have been enqueued with a tenant's token, whose job carries that
    tenant: then the newest job of that name and run id, whichever its tenant."""
    name, tenant, run_id = run["name"], run.get("tenant"), run["runId"]
    job_id = jobs.get((name, tenant, run_id))
    if job_id is None and tenant is None:
        job_id = next((j for (n, _, r), j in jobs.items() if (n, r) == (name, run_id)), None)
    return job_id


@routes.get(PREFIX + "/backfills")
@guarded
async def backfills(request: web.Request) -> web.Response:
    principal, secret = await viewer(request)
    principal.require_operator("the backfill ledger")
    driver = request.app[EDGE].driver
    only = request.query.get("name") or None
    status = _status(request.query.get("status"))
    runs = await inspect_backfills(driver.backfills, name=only, status=status, limit=LEDGER_ROWS)
    every_run = await inspect_backfills(driver.backfills, limit=10_000)
    declarations = declared(request)
    diff = pending_backfills(
        runs=every_run,
        environment=request.app[CONFIG].common.environment,
        declarations=declarations,
    )
    by_name = {d["name"]: d for d in declarations}
    named = [r["name"] for r in runs] + [r["name"] for r in diff["rows"] if r["runId"]]
    jobs = await pass_jobs(driver, named)
    return page(
        request,
        "backfills.html",
        principal=principal,
        secret=secret,
        runs=[
            {
                **r,
                "jobId": pass_job(jobs, r),
                "checksumMoved": r["name"] in by_name
                and checksum_moved(by_name[r["name"]], r["checksum"]),
            }
            for r in runs
        ],
        declared=[{**r, "jobId": pass_job(jobs, r)} for r in diff["rows"]],
        pending=diff["pending"],
        orphaned=diff["orphaned"],
        environment=diff["environment"],
        running=sum(1 for r in every_run if r["status"] == "running"),
        query={"name": only or "", "status": status or ""},
        statuses=STATUSES,
        limit=LEDGER_ROWS,
    )


__all__ = ["declared", "pass_job", "pass_jobs", "routes"]
