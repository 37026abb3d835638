"""A job's result over HTTP: ``GET /v1/jobs/{id}/result?wait=30s``, and the enqueue-and-wait
``POST /v1/jobs/{name}?wait=30s`` (``enqueue.py``).

| Route | Scope | Answers |
|---|---|---|
| ``GET /v1/jobs/{id}/result?wait=`` | ``read`` | 200 ``JobResult`` once the job is finished (at once if it is), 202 ``JobResult`` (``state`` live, ``result`` null) when ``wait`` runs out first |
| ``POST /v1/jobs/{name}?wait=`` | ``enqueue:<name>`` | 200 ``JobResult`` (with ``runId``, ``deduped`` and ``debounced``) once the run it queued settles, 202 with the same fields (``state`` live) when ``wait`` runs out: the enqueue stands, read it later by its ``id`` |

``JobResult`` is ``{"id", "name", "state", "result", "error"}``: ``result`` is what the body
returned when ``state`` is ``done`` (null otherwise, and for a body that returned nothing);
``error`` is ``{"code", "message"}`` when the job ended ``dead``, ``failed`` or ``cancelled``
(its code as ``last_error`` names it, ``X_JOB_FAILED`` when it names none; the message without
the stack), null otherwise.

``wait`` is a duration with its unit (``30s``, ``500ms``), at most ``UJOBS_API_MAX_WAIT_MS``
(60 s by default; past it 400 ``X_INPUT_INVALID``); absent or ``0s``: answer at once. A wait is woken by the settle's
own announcement (``ujobs.drivers.results``: Postgres ``NOTIFY x_jobs_settled`` on one LISTEN
session per api process, the Redis driver's ``{prefix}:results`` channel), never by reading the
row in a loop; a row buried by a claim after its lease lapsed on its final attempt (Postgres)
announces nothing, and is answered when the wait runs out.

Tenancy as for reads: a tenant token's ``GET`` of another tenant's job (or of no job) is 404
``X_JOB_NOT_FOUND``, the same answer, before any wait. ``POST ?wait`` waits on the run its own
enqueue answered, which is the token's tenant's by construction (the live key includes it).
"""  # noqa: E501

from __future__ import annotations

from typing import Any

from aiohttp import web

from ujobs.drivers.base import JobDriver, JobRow
from ujobs.drivers.results import FINISHED_STATES, JobResults, results_of, wait_settled
from ujobs.durations import duration_ms
from ujobs.errors import (
    InputInvalidError,
    InvariantError,
    JobNotFoundError,
    NotImplementedByDriverError,
)
from ujobs.jobs.result_read import failure_of
from ujobs.services.api.common import CONFIG, EDGE, caller, json_ok
from ujobs.services.config.variables import DEFAULT_API_MAX_WAIT_MS

routes = web.RouteTableDef()

MAX_WAIT_MS = DEFAULT_API_MAX_WAIT_MS


def wait_of(request: web.Request, *, allowed: frozenset[str] = frozenset({"wait"})) -> int | None:
    """``?wait=`` in milliseconds (None: absent); refused past the api's cap
    (``UJOBS_API_MAX_WAIT_MS``, 60 s by default) or unparseable."""
    unknown = sorted(set(request.query) - allowed)
    if unknown:
        raise InputInvalidError(
            f"unknown parameter(s) {', '.join(unknown)}; this route reads "
            + ", ".join(sorted(allowed)),
            meta={"issues": [{"path": k, "message": "unknown parameter"} for k in unknown]},
        )
    raw = request.query.get("wait")
    if raw is None:
        return None
    try:
        wait = duration_ms(raw, field="wait")
    except InvariantError:
        raise InputInvalidError(
            f"wait {raw[:40]!r} is not a duration; write it with its unit, e.g. 30s or 500ms",
            meta={"issues": [{"path": "wait", "message": "duration"}]},
        ) from None
    cap = request.app[CONFIG].max_wait_ms
    if wait > cap:
        raise InputInvalidError(
            f"wait is at most {cap} ms (UJOBS_API_MAX_WAIT_MS); ask again for longer",
            meta={"issues": [{"path": "wait", "message": f"at most {cap} ms"}]},
        )
    return wait


def results_or_refuse(driver: JobDriver) -> JobResults:
    results = results_of(driver)
    if results is None:
        raise NotImplementedByDriverError(
            f"the {driver.name} driver keeps no results to wait for",
            meta={"driver": driver.name, "capability": "results"},
        )
    return results


def result_json(row: JobRow) -> dict[str, Any]:
    """The ``JobResult`` document of a row (see the module's docstring)."""
    error: dict[str, Any] | None = None
    if row.state in ("dead", "failed", "cancelled"):
        failed = failure_of(row)
        error = {"code": failed.code, "message": failed.message}
    return {
        "id": row.id,
        "name": row.name,
        "state": row.state,
        "result": row.result if row.state == "done" else None,
        "error": error,
    }


def settled_response(row: JobRow, extra: dict[str, Any] | None = None) -> web.Response:
    """200 when the row is finished, 202 while it is live."""
    body = {**result_json(row), **(extra or {})}
    return json_ok(body, status=200 if row.state in FINISHED_STATES else 202)


async def wait_for(results: JobResults, row: JobRow, wait_ms: int | None) -> JobRow:
    """``row`` once finished or when ``wait_ms`` runs out (never None: a row that went while
    waiting — purged, removed — answers as last read)."""
    if row.state in FINISHED_STATES or not wait_ms:
        return row
    return await wait_settled(results, row.id, wait_ms / 1000) or row


@routes.get("/v1/jobs/{job}/result")
async def job_result(request: web.Request) -> web.Response:
    principal = await caller(request, "read")
    wait = wait_of(request)
    driver = request.app[EDGE].driver
    results = results_or_refuse(driver)
    job_id = request.match_info["job"]
    row = await results.read(job_id)
    if row is None or not principal.sees(row.tenant_id):
        raise JobNotFoundError(
            f"no job has the id {job_id!r}; GET /v1/jobs lists them", meta={"id": job_id}
        )
    return settled_response(await wait_for(results, row, wait))


__all__ = [
    "MAX_WAIT_MS",
    "result_json",
    "results_or_refuse",
    "routes",
    "settled_response",
    "wait_for",
    "wait_of",
]
