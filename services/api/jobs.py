"""The operator surface over HTTP, one job at a time: the same ``ujobs.introspect`` functions
``ujobs jobs`` calls (one implementation, two faces), behind a token.

| Route | Scope | Answers (the CLI's ``--json`` document) |
|---|---|---|
| ``GET /v1/jobs/{id}`` | ``read`` | the job, its steps, its ``result`` once done, input values redacted (``ujobs jobs show``; its result waits: ``results.py``) |
| ``GET /v1/jobs?queue=&name=&state=&tenantId=&idPrefix=&limit=&after=&before=`` | ``read`` | one page, newest first; ``next`` / ``prev`` cursors (``ujobs jobs list``) |
| ``POST /v1/jobs/{job}/cancel`` ``{"reason"?}`` | ``operate`` | the cancelled job |
| ``POST /v1/jobs/{job}/retry`` ``{"fromStep"?}`` | ``operate`` | the re-queued job |
| ``POST /v1/jobs/{job}/promote`` | ``operate`` | the promoted job |
| ``DELETE /v1/jobs/{id}`` | ``operate`` | ``{"id", "removed": true}`` |

A tenant token sees only its own tenant's jobs: another tenant's job is ``X_JOB_NOT_FOUND``
(404, never 403, so an id reveals nothing), and a list is always filtered to its tenant. Its
``lastError`` is the error's code and message without the stack (which names the server's
paths); an operator token reads the whole of it.
"""  # noqa: E501

from __future__ import annotations

from typing import Any

from aiohttp import web

from ujobs.drivers.base import ALL_STATES, DEFAULT_JOB_PAGE, MAX_JOB_PAGE, JobFilter, JobRow
from ujobs.errors import InputInvalidError, JobNotFoundError, JobPageInvalidError
from ujobs.introspect import (
    cancel_job,
    get_job,
    job_document,
    job_json,
    list_jobs,
    promote_job,
    remove_job,
    retry_job,
)
from ujobs.limits import TEXT_LIMITS, text_problem
from ujobs.services.api.auth import Principal
from ujobs.services.api.common import EDGE, caller, json_ok, read_object

routes = web.RouteTableDef()

_LIST_PARAMS = frozenset(
    {"queue", "name", "state", "tenantId", "idPrefix", "limit", "after", "before"}
)


async def _visible_job(request: web.Request, principal: Principal) -> JobRow:
    """The row of ``{job}`` (an id) if this token may see it; otherwise the same 404 as no row."""
    job_id = request.match_info["job"]
    try:
        row = await get_job(request.app[EDGE].driver, job_id)
    except JobNotFoundError:
        row = None
    if row is None or not principal.sees(row.tenant_id):
        raise JobNotFoundError(
            f"no job has the id {job_id!r}; GET /v1/jobs lists them", meta={"id": job_id}
        )
    return row


async def _optional_body(request: web.Request, allowed: frozenset[str]) -> dict[str, Any]:
    if not request.body_exists:
        return {}
    return await read_object(request, allowed)


def _text(body: dict[str, Any], key: str) -> str | None:
    value = body.get(key)
    if value is not None and not isinstance(value, str):
        raise InputInvalidError(
            f"{key} must be a string", meta={"issues": [{"path": key, "message": "string"}]}
        )
    return value


@routes.get("/v1/jobs/{job}")
async def show(request: web.Request) -> web.Response:
    principal = await caller(request, "read")
    row = await _visible_job(request, principal)
    return json_ok(
        await job_document(
            request.app[EDGE].driver, row, error_detail=principal.operator, show_result=True
        )
    )


_TEXT_PARAMS = {"tenantId": "tenant", "queue": "queue", "name": "name", "idPrefix": "runId"}
"""The list's text filters and the limit each is held to (``ujobs.limits``): a filter past it
could match no row anyway, and answers 400 rather than an empty page."""


def job_filter(query: Any, principal: Principal) -> JobFilter:
    """``GET /v1/jobs``'s query as the CLI's ``JobFilter``; a tenant token's is its tenant."""
    unknown = sorted(set(query) - _LIST_PARAMS)
    if unknown:
        raise InputInvalidError(
            f"unknown parameter(s) {', '.join(unknown)}; /v1/jobs reads "
            + ", ".join(sorted(_LIST_PARAMS)),
            meta={"issues": [{"path": k, "message": "unknown parameter"} for k in unknown]},
        )
    state = query.get("state")
    if state is not None and state not in ALL_STATES:
        raise InputInvalidError(
            f"state must be one of {', '.join(ALL_STATES)}",
            meta={"issues": [{"path": "state", "message": "state"}]},
        )
    raw_limit = query.get("limit")
    limit = DEFAULT_JOB_PAGE
    if raw_limit is not None:
        # Its digits counted before int(): a number past 64 bits would be echoed in the
        # refusal's meta, which JSON cannot carry.
        if not (raw_limit.isascii() and raw_limit.isdigit() and len(raw_limit) <= 6):
            raise JobPageInvalidError(
                f"limit must be a whole number from 1 to {MAX_JOB_PAGE}",
                meta={"limit": raw_limit[:20], "max": MAX_JOB_PAGE},
            )
        limit = int(raw_limit)
    for param, field in _TEXT_PARAMS.items():
        given = query.get(param)
        problem = None if given is None else text_problem(given, TEXT_LIMITS[field])
        if problem is not None:
            raise InputInvalidError(
                f"{param} {problem}",
                meta={
                    "issues": [{"path": param, "message": problem}],
                    "maxBytes": TEXT_LIMITS[field],
                },
            )
    tenant = query.get("tenantId") if principal.operator else principal.tenant_id
    return JobFilter(
        queue=query.get("queue"),
        name=query.get("name"),
        state=next((s for s in ALL_STATES if s == state), None),
        tenant_id=tenant,
        id_prefix=query.get("idPrefix"),
        limit=limit,
        after=query.get("after"),
        before=query.get("before"),
    )


@routes.get("/v1/jobs")
async def page(request: web.Request) -> web.Response:
    principal = await caller(request, "read")
    flt = job_filter(request.query, principal)
    return json_ok(await list_jobs(request.app[EDGE].driver, flt, error_detail=principal.operator))


@routes.post("/v1/jobs/{job}/cancel")
async def cancel(request: web.Request) -> web.Response:
    principal = await caller(request, "operate")
    body = await _optional_body(request, frozenset({"reason", "detachChildren"}))
    detach = body.get("detachChildren", False)
    if not isinstance(detach, bool):
        raise InputInvalidError(
            "detachChildren must be a boolean",
            meta={"issues": [{"path": "detachChildren", "message": "boolean"}]},
        )
    row = await _visible_job(request, principal)
    moved = await cancel_job(
        request.app[EDGE].driver, row.id, _text(body, "reason"), detach_children=detach
    )
    return json_ok(job_json(moved, error_detail=principal.operator))


@routes.post("/v1/jobs/{job}/retry")
async def retry(request: web.Request) -> web.Response:
    principal = await caller(request, "operate")
    body = await _optional_body(request, frozenset({"fromStep"}))
    row = await _visible_job(request, principal)
    moved = await retry_job(request.app[EDGE].driver, row.id, from_step=_text(body, "fromStep"))
    return json_ok(job_json(moved, error_detail=principal.operator))


@routes.post("/v1/jobs/{job}/promote")
async def promote(request: web.Request) -> web.Response:
    principal = await caller(request, "operate")
    row = await _visible_job(request, principal)
    moved = await promote_job(request.app[EDGE].driver, row.id)
    return json_ok(job_json(moved, error_detail=principal.operator))


@routes.delete("/v1/jobs/{job}")
async def remove(request: web.Request) -> web.Response:
    principal = await caller(request, "operate")
    row = await _visible_job(request, principal)
    await remove_job(request.app[EDGE].driver, row.id)
    return json_ok({"id": row.id, "removed": True})


__all__ = ["job_filter", "routes"]
