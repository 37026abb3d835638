"""The OpenAPI 3.1 document of the api (``GET /v1/openapi.json``), built from the app's routes
and each registered job's input JSON Schema.

Each job gets a component (``Input_<job>``) and its own enqueue paths
(``POST /v1/jobs/<job>`` and ``/batch``) whose body names that component, so a client
generator in another language gets a typed input per job; the generic ``/v1/jobs/{job}`` stays
for jobs the document did not know. Every error is the ``Error`` envelope; every ``/v1`` route
but the manifest and this document takes a bearer token (``ujobs tokens create``). A test checks
that every route the app serves is documented and nothing else is, and validates the document.
"""

from __future__ import annotations

import re
from typing import Any

from ujobs.drivers.base import ALL_STATES, MAX_JOB_PAGE
from ujobs.jobs.registry import Registry
from ujobs.services.api.exports import EXPORT_SCHEMAS, export_paths
from ujobs.services.api.openapi_schemas import DEBOUNCE, PRIORITY, SCHEMAS
from ujobs.services.api.openapi_shapes import named_shapes
from ujobs.services.api.openapi_webhooks import WEBHOOK_SCHEMAS, webhook_paths

MAX_BATCH_DOC = 1_000
"""``api_enqueue.MAX_BATCH_INPUTS``, repeated so this module imports no route module."""

_ERROR_TEXT = {
    "400": "invalid input (X_INPUT_INVALID, X_JOB_PAGE_INVALID, …)",
    "401": "no, unknown, revoked or expired token (X_UNAUTHORIZED)",
    "403": "a scope missing (X_FORBIDDEN) or another tenant's work (X_TENANCY_ACTOR_MISMATCH)",
    "404": "unknown (X_JOB_UNKNOWN, X_JOB_NOT_FOUND, X_TASK_UNKNOWN, X_WEBHOOK_ENDPOINT_UNKNOWN)",
    "409": "a live run holds the key under onConflict: error (X_JOB_DUPLICATE, meta.id names "
    "it), or the job is not in a state this move applies to",
    "413": "the body is over UJOBS_API_MAX_BODY_BYTES (X_BODY_TOO_LARGE)",
    "429": "over UJOBS_API_RATE_PER_TOKEN (X_RATE_LIMITED); see Retry-After",
    "501": "not on this driver (X_NOT_IMPLEMENTED): onConflict error on /batch needs Postgres",
    "503": "the database is unreachable (X_DRIVER_UNREACHABLE) or the process drains "
    "(X_DRAINING): see Retry-After; or unavailable until an operator acts (X_DRIVER_UNAVAILABLE, "
    "X_SCHEMA_OUTDATED): no Retry-After",
}


_BATCH_ON_CONFLICT = {
    "description": "dedupe (default): an input whose key a live run holds answers that run; "
    "error: every input a new job, or 409 X_JOB_DUPLICATE naming each held input "
    "(meta.failures) and nothing queued (501 off the Postgres driver)",
    "type": "string",
    "enum": ["dedupe", "error"],
}


_FOLLOW_THE_ID = (
    ("ShowJob", "show_job", "read the job this enqueue made"),
    ("CancelJob", "cancel_job", "stop it while it is live"),
    ("RetryJob", "retry_job", "re-queue it once finished"),
    ("PromoteJob", "promote_job", "make it due now while it waits"),
    ("RemoveJob", "remove_job", "delete it (never while it runs)"),
)


def _enqueued_links() -> dict[str, Any]:
    """OpenAPI links from an enqueue's answer to the routes on the job it made (its ``id`` is
    their ``{job}``): a generated client can follow them, and schemathesis's stateful phase
    chains enqueue -> show -> cancel / retry through them."""
    return {
        link: {"operationId": op, "parameters": {"job": "$response.body#/id"}, "description": text}
        for link, op, text in _FOLLOW_THE_ID
    }


def _with_links(op: dict[str, Any]) -> dict[str, Any]:
    op["responses"]["202"]["links"] = _enqueued_links()
    return op


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _error(status: str) -> dict[str, Any]:
    response = _json(_ERROR_TEXT.get(status, "error"), _ref("Error"))
    if status in ("429", "503"):
        response["headers"] = {
            "Retry-After": {"description": "seconds to wait", "schema": {"type": "integer"}}
        }
    return response


def _path_param(name: str, description: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "path",
        "required": True,
        "description": description,
        "schema": {"type": "string", "pattern": r"^[A-Za-z0-9_][A-Za-z0-9_.:\-]{0,199}$"},
    }


def _op(
    op_id: str,
    summary: str,
    ok: tuple[str, str, dict[str, Any]],
    errors: tuple[str, ...],
    *,
    params: list[dict[str, Any]] | None = None,
    body: dict[str, Any] | None = None,
    body_required: bool = True,
    secured: bool = True,
) -> dict[str, Any]:
    status, text, schema = ok
    statuses = ("401", "429", "503", *errors) if secured else errors
    responses = {status: _json(text, schema), **{s: _error(s) for s in sorted(set(statuses))}}
    op: dict[str, Any] = {"operationId": op_id, "summary": summary, "responses": responses}
    if params:
        op["parameters"] = params
    if body is not None:
        op["requestBody"] = {
            "required": body_required,
            "content": {"application/json": {"schema": body}},
        }
    if not secured:
        op["security"] = []
    return op


def component_name(job: str, kind: str = "Input") -> str:
    return f"{kind}_" + re.sub(r"[^A-Za-z0-9._-]", "_", job)


MAX_WAIT_DOC_S = 60
"""``api_results.MAX_WAIT_MS`` in seconds, repeated so this module imports no route module."""


def wait_param(what: str) -> dict[str, Any]:
    return {
        "name": "wait",
        "in": "query",
        "required": False,
        "description": f"how long to wait for {what} to settle: a duration with its unit "
        f"(30s, 500ms), at most UJOBS_API_MAX_WAIT_MS ({MAX_WAIT_DOC_S}s by default; 400 past "
        "it); absent or 0s: answer at once",
        "schema": {"type": "string", "pattern": r"^[0-9]{1,9}(ms|s|m)$"},
    }


def _with_wait(op: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
    """An enqueue that may wait: ``?wait=``, and 200 with the run's result once it settles."""
    op["parameters"] = [*op.get("parameters", []), wait_param("the run it queues")]
    op["responses"]["200"] = _json(
        "with ?wait=: the run settled within it; its result (or its error)", result
    )
    op["responses"]["202"]["description"] += (
        "; with ?wait=: not settled in time, its state in state (read it later by its id)"
    )
    return op


def _result_components(job: str, output: dict[str, Any] | None, into: dict[str, Any]) -> str:
    """The name of the 200 schema of ``job``'s enqueue-and-wait: ``EnqueuedResult``, or, for
    a job that declares its output, ``EnqueuedResult_<job>`` whose ``result`` is that type."""
    if output is None:
        return "EnqueuedResult"
    out_name = component_name(job, "Output")
    into[out_name] = _hoist(output, out_name, into)
    into[component_name(job, "ResultOf")] = {
        "type": "object",
        "properties": {"result": {"anyOf": [_ref(out_name), {"type": "null"}]}},
    }
    name = component_name(job, "EnqueuedResult")
    into[name] = {"allOf": [_ref("EnqueuedResult"), _ref(component_name(job, "ResultOf"))]}
    return name


def _hoist(schema: Any, prefix: str, into: dict[str, Any]) -> Any:
    """``schema`` with its ``$defs`` moved to components (``<prefix>__<Def>``) and every
    ``#/$defs/X`` reference pointed there: a ``$ref`` resolves against the document root."""
    if isinstance(schema, dict):
        defs = schema.get("$defs")
        if isinstance(defs, dict):
            for key, value in defs.items():
                into[f"{prefix}__{key}"] = _hoist(value, prefix, into)
        out: dict[str, Any] = {}
        for key, value in schema.items():
            if key == "$defs":
                continue
            if key == "$ref" and isinstance(value, str) and value.startswith("#/$defs/"):
                out[key] = f"#/components/schemas/{prefix}__{value.removeprefix('#/$defs/')}"
            else:
                out[key] = _hoist(value, prefix, into)
        return out
    if isinstance(schema, list):
        return [_hoist(v, prefix, into) for v in schema]
    return schema


def _enqueue_paths(
    job: str, input_schema: dict[str, Any], result: str = "EnqueuedResult"
) -> dict[str, Any]:
    single = {
        "allOf": [_ref("EnqueueOptions")],
        "type": "object",
        "required": ["input"],
        "properties": {"input": input_schema},
    }
    batch = {
        "type": "object",
        "required": ["inputs"],
        "properties": {
            "inputs": {
                "type": "array",
                "minItems": 1,
                "maxItems": MAX_BATCH_DOC,
                "items": input_schema,
            },
            "delay": {"type": ["string", "integer"]},
            "debounce": DEBOUNCE,
            "priority": PRIORITY,
            "queue": {"type": "string"},
            "onConflict": _BATCH_ON_CONFLICT,
        },
    }
    errors = ("400", "403", "404", "413")
    single_errors = (*errors, "409")
    slug = re.sub(r"[^A-Za-z0-9_]", "_", job)
    return {
        f"/v1/jobs/{job}": {
            "post": _with_wait(
                _with_links(
                    _op(
                        f"enqueue_{slug}",
                        f"Enqueue {job} (scope enqueue:{job}); with ?wait=, and wait for it",
                        (
                            "202",
                            "queued, or deduped onto the live run of its key",
                            _ref("Enqueued"),
                        ),
                        single_errors,
                        body=single,
                    )
                ),
                _ref(result),
            )
        },
        f"/v1/jobs/{job}/batch": {
            "post": _op(
                f"enqueue_many_{slug}",
                f"Enqueue up to {MAX_BATCH_DOC} {job} runs at once; all or none",
                ("202", "one answer per input, in order", _ref("EnqueuedBatch")),
                (*single_errors, "501"),
                body=batch,
            )
        },
    }


def _result_op() -> dict[str, Any]:
    op = _op(
        "job_result",
        "A job's result, once it settles (waiting up to ?wait=); a tenant token reads its "
        "tenant's only",
        ("200", "the job is finished: its result, or its error", _ref("JobResult")),
        ("400", "403", "404", "501"),
        params=[wait_param("the job")],
    )
    op["responses"]["202"] = _json(
        "the wait ran out (or none was asked) while the job is live: its state", _ref("JobResult")
    )
    return op


def _operator_paths(tasks: list[str]) -> dict[str, Any]:
    job = _path_param("job", "a job's id (GET, DELETE, moves) or a job's name (POST: enqueue)")
    name = _path_param("name", "the event's name")
    queue = _path_param("queue", "the queue's name")
    task = _path_param("task", "the task's name (one of the app's tasks)")
    tenant = {
        "name": "tenant",
        "in": "path",
        "required": True,
        "description": "the tenant's id (1 to 200 bytes)",
        "schema": {"type": "string", "minLength": 1, "maxLength": 200},
    }
    if tasks:
        task["schema"] = {"type": "string", "enum": tasks}
    query = [
        {"name": "queue", "in": "query", "schema": {"type": "string"}},
        {"name": "name", "in": "query", "schema": {"type": "string"}},
        {"name": "state", "in": "query", "schema": {"type": "string", "enum": list(ALL_STATES)}},
        {"name": "tenantId", "in": "query", "schema": {"type": "string"}},
        {
            "name": "idPrefix",
            "in": "query",
            "description": "ids starting with this (ignoring case)",
            "schema": {"type": "string"},
        },
        {
            "name": "limit",
            "in": "query",
            "schema": {"type": "integer", "minimum": 1, "maximum": MAX_JOB_PAGE},
        },
        {"name": "after", "in": "query", "schema": {"type": "string"}},
        {"name": "before", "in": "query", "schema": {"type": "string"}},
    ]
    moved = ("200", "the job after the move", _ref("Job"))
    reason = {
        "type": "object",
        "properties": {
            "reason": {"type": "string"},
            "detachChildren": {
                "description": "keep the job's live children running (default: they are "
                "cancelled with it, except those enqueued detached)",
                "type": "boolean",
            },
        },
    }
    from_step = {"type": "object", "properties": {"fromStep": {"type": "string"}}}
    paused = ("200", "the new state", _ref("Paused"))
    any_input = {
        "allOf": [_ref("EnqueueOptions")],
        "type": "object",
        "properties": {"input": {"description": "the job's input (its schema: /v1/manifest)"}},
    }
    batch = {
        "type": "object",
        "required": ["inputs"],
        "properties": {
            "inputs": {"type": "array", "minItems": 1, "maxItems": MAX_BATCH_DOC, "items": {}},
            "delay": {"type": ["string", "integer"]},
            "debounce": DEBOUNCE,
            "priority": PRIORITY,
            "queue": {"type": "string"},
            "onConflict": _BATCH_ON_CONFLICT,
        },
    }
    return {
        "/v1/jobs": {
            "get": _op(
                "list_jobs",
                "One page of jobs, newest first; a tenant token sees its tenant's only",
                ("200", "a page; next/prev are the cursors", _ref("JobPage")),
                ("400", "403"),
                params=query,
            )
        },
        "/v1/jobs/{job}": {
            "parameters": [job],
            "get": _op(
                "show_job",
                "One job with its steps; input values redacted",
                ("200", "the job", _ref("JobDocument")),
                ("403", "404"),
            ),
            "post": _with_wait(
                _with_links(
                    _op(
                        "enqueue",
                        "Enqueue the job named {job} (scope enqueue:{job}); with ?wait=, and "
                        "wait for it",
                        (
                            "202",
                            "queued, or deduped onto the live run of its key",
                            _ref("Enqueued"),
                        ),
                        ("400", "403", "404", "409", "413", "501"),
                        body=any_input,
                    )
                ),
                _ref("EnqueuedResult"),
            ),
            "delete": _op(
                "remove_job",
                "Delete a job and its steps (never a running one)",
                ("200", "removed", _ref("Removed")),
                ("403", "404", "409"),
            ),
        },
        "/v1/jobs/{job}/result": {
            "parameters": [job],
            "get": _result_op(),
        },
        "/v1/jobs/{job}/batch": {
            "parameters": [job],
            "post": _op(
                "enqueue_many",
                f"Enqueue up to {MAX_BATCH_DOC} runs of the job named {{job}}; all or none",
                ("202", "one answer per input, in order", _ref("EnqueuedBatch")),
                ("400", "403", "404", "409", "413", "501"),
                body=batch,
            ),
        },
        "/v1/jobs/{job}/cancel": {
            "parameters": [job],
            "post": _op(
                "cancel_job",
                "Stop a live job and its live children (unless detached)",
                moved,
                ("400", "403", "404", "409", "413"),
                body=reason,
                body_required=False,
            ),
        },
        "/v1/jobs/{job}/retry": {
            "parameters": [job],
            "post": _op(
                "retry_job",
                "Re-queue a finished job; fromStep drops that step and every later one",
                moved,
                ("400", "403", "404", "409", "413"),
                body=from_step,
                body_required=False,
            ),
        },
        "/v1/jobs/{job}/promote": {
            "parameters": [job],
            "post": _op(
                "promote_job",
                "Make a job waiting on its run time due now",
                moved,
                ("403", "404", "409"),
            ),
        },
        "/v1/events/{name}": {
            "parameters": [name],
            "post": _op(
                "publish_event",
                "Publish an event (scope events:publish)",
                ("202", "published", _ref("Event")),
                ("400", "403", "413"),
                body={"type": "object", "properties": {"payload": {}}},
            ),
        },
        "/v1/queues": {
            "get": _op(
                "list_queues",
                "Every queue: rows per state, due, oldest due, paused (operator token)",
                ("200", "the queues", _ref("Queues")),
                ("403",),
            )
        },
        "/v1/queues/{queue}": {
            "parameters": [queue],
            "get": _op(
                "show_queue",
                "One queue, and the tenants with the most due jobs in it (operator token)",
                ("200", "the queue", _ref("QueueTenantsRead")),
                ("400", "403", "404"),
            ),
        },
        "/v1/queues/{queue}/pause": {
            "parameters": [queue],
            "post": _op("pause_queue", "Pause a queue (operator)", paused, ("400", "403", "404")),
        },
        "/v1/queues/{queue}/resume": {
            "parameters": [queue],
            "post": _op("resume_queue", "Resume a queue (operator)", paused, ("400", "403", "404")),
        },
        "/v1/tenants/{tenant}/weight": {
            "parameters": [tenant],
            "get": _op(
                "get_tenant_weight",
                "A tenant's weight in the fair claim (operator token; a tenant token is 404)",
                ("200", "the weight", _ref("TenantWeight")),
                ("400", "403", "404"),
            ),
            "put": _op(
                "set_tenant_weight",
                "Set a tenant's weight, 1..1000, from the next claim (operator token; a tenant "
                "token is 404)",
                ("200", "the weight set", _ref("TenantWeight")),
                ("400", "403", "404"),
                body=_ref("TenantWeightSet"),
            ),
        },
        "/v1/tokens": {
            "get": _op(
                "list_tokens",
                "Every token, never a secret (operator token with admin; `ujobs tokens list`)",
                ("200", "the tokens, newest first", _ref("Tokens")),
                ("403",),
            )
        },
        "/v1/tasks": {
            "get": _op(
                "list_tasks",
                "The app's cron tasks: last and next fire, paused (operator token)",
                ("200", "the tasks", _ref("Tasks")),
                ("403",),
            )
        },
        "/v1/tasks/{task}/pause": {
            "parameters": [task],
            "post": _op("pause_task", "Pause a task (operator)", paused, ("403", "404")),
        },
        "/v1/tasks/{task}/resume": {
            "parameters": [task],
            "post": _op("resume_task", "Resume a task (operator)", paused, ("403", "404")),
        },
    }


def _service_paths() -> dict[str, Any]:
    status = {"type": "object", "properties": {"status": {"type": "string"}}}
    manifest = {
        "type": "object",
        "required": ["jobs", "tasks"],
        "properties": {
            "jobs": {"type": "array", "items": {"type": "object"}},
            "tasks": {"type": "array", "items": {"type": "object"}},
        },
    }
    return {
        "/healthz": {
            "get": _op(
                "healthz",
                "Liveness: the process is up",
                ("200", "alive", status),
                (),
                secured=False,
            )
        },
        "/readyz": {
            "get": _op(
                "readyz",
                "Readiness: the database answers and the process is not draining",
                ("200", "ready", status),
                ("503",),
                secured=False,
            )
        },
        "/metrics": {
            "get": {
                "operationId": "metrics",
                "summary": "Prometheus metrics (queue_depth, jobs_total, ...)",
                "security": [],
                "responses": {
                    "200": {
                        "description": "the exposition format",
                        "content": {"text/plain": {"schema": {"type": "string"}}},
                    }
                },
            }
        },
        "/v1/manifest": {
            "get": _op(
                "manifest",
                "Every job and task descriptor, with each job's input JSON Schema",
                ("200", "the manifest", manifest),
                (),
                secured=False,
            )
        },
        "/v1/openapi.json": {
            "get": _op(
                "openapi",
                "This document",
                ("200", "OpenAPI 3.1", {"type": "object"}),
                (),
                secured=False,
            )
        },
    }


def enqueue_paths_of(registry: Registry) -> dict[str, str]:
    """Per-job enqueue path -> job name (a name with '/' cannot be a path segment)."""
    return {f"/v1/jobs/{name}": name for name in sorted(registry.jobs) if "/" not in name}


def openapi_document(registry: Registry) -> dict[str, Any]:
    schemas = {**SCHEMAS, **EXPORT_SCHEMAS, **WEBHOOK_SCHEMAS}
    paths: dict[str, Any] = {
        **_service_paths(),
        **_operator_paths(sorted(registry.tasks)),
        **export_paths(_json, lambda description: _json(description, _ref("Error"))),
        **webhook_paths(_op, _path_param),
    }
    for name in enqueue_paths_of(registry).values():
        component = component_name(name)
        described = registry.jobs[name].describe()
        schemas[component] = _hoist(described["input"], component, schemas)
        result = _result_components(name, described["output"], schemas)
        paths.update(_enqueue_paths(name, _ref(component), result))
    return named_shapes(
        {
            "openapi": "3.1.0",
            "info": {
                "title": "ultimate-jobs api",
                "version": "1",
                "description": "Enqueue jobs, publish events and operate the queue over HTTP. "
                'Every error is {"error": {code, message, meta}} with an X_ code.',
            },
            "security": [{"bearer": []}],
            "paths": paths,
            "components": {
                "schemas": schemas,
                "securitySchemes": {
                    "bearer": {
                        "type": "http",
                        "scheme": "bearer",
                        "description": "a token from `ujobs tokens create`",
                    }
                },
            },
        }
    )


__all__ = ["component_name", "enqueue_paths_of", "openapi_document"]
