"""The api's component schemas of its OpenAPI document (``ujobs.services.api.openapi``): the error
envelope, a job row, a page, and the answers of the operator routes; the per-job input
components are added to these when the document is built."""

from __future__ import annotations

from typing import Any

from ujobs.drivers.base import ALL_STATES

_ERROR = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message", "meta"],
            "properties": {
                "code": {"type": "string", "pattern": "^X_[A-Z0-9_]+$"},
                "message": {"type": "string"},
                "meta": {"type": "object"},
            },
        }
    },
}
_NULLABLE_STRING = {"type": ["string", "null"]}
_NULLABLE_INT = {"type": ["integer", "null"]}
DEBOUNCE = {
    "description": "a duration ('10s', '3d') or milliseconds, above zero, at most a year: "
    "this enqueue's debounce (overrides the job's); a run with the key that has not started "
    "yet is moved to now + debounce and takes this input",
    "type": ["string", "integer"],
}
PRIORITY = {
    "description": "0 (handed out first) to 9 (last); overrides the job's declared priority "
    "(0 unless it declares one); out of range or not a whole number is 400 X_PRIORITY_INVALID",
    "type": "integer",
    "minimum": 0,
    "maximum": 9,
}
_JOB = {
    "type": "object",
    "required": ["id", "runId", "name", "queue", "state", "attempt", "maxAttempts"],
    "properties": {
        "id": {"type": "string"},
        "runId": {"type": "string"},
        "name": {"type": "string"},
        "queue": {"type": "string"},
        "state": {"type": "string", "enum": list(ALL_STATES)},
        "tenantId": _NULLABLE_STRING,
        "idempotencyKey": {
            "description": "masked ([redacted]) like the input's values: it is computed from them",
            "type": "string",
        },
        "attempt": {"type": "integer"},
        "maxAttempts": {"type": "integer"},
        "runAtMs": {"type": "integer"},
        "createdAtMs": {"type": "integer"},
        "updatedAtMs": {"type": "integer"},
        "finishedAtMs": _NULLABLE_INT,
        "claimedBy": _NULLABLE_STRING,
        "leaseExpiresAtMs": _NULLABLE_INT,
        "progress": {},
        "lastError": _NULLABLE_STRING,
        "traceparent": _NULLABLE_STRING,
        "enqueuedBy": _NULLABLE_STRING,
        "priority": {
            "description": "0 (handed out first) to 9 (last)",
            "type": "integer",
            "minimum": 0,
            "maximum": 9,
        },
    },
}
SCHEMAS: dict[str, Any] = {
    "Error": _ERROR,
    "Enqueued": {
        "type": "object",
        "required": ["id", "runId", "deduped", "debounced"],
        "properties": {
            "id": {"type": "string"},
            "runId": {"type": "string"},
            "deduped": {
                "description": "no new run: the answer names the run that holds the key (live, "
                "or done within the job's unique_for)",
                "type": "boolean",
            },
            "debounced": {
                "description": "that run had not started: this enqueue moved it to now + "
                "debounce with this input (deduped is true too)",
                "type": "boolean",
            },
        },
        "description": "with ?wait= (the wait ran out first) also the JobResult fields: "
        "name, state (live), result and error (null)",
    },
    "EnqueuedBatch": {
        "type": "object",
        "required": ["jobs"],
        "properties": {
            "jobs": {"type": "array", "items": {"$ref": "#/components/schemas/Enqueued"}}
        },
    },
    "EnqueueOptions": {
        "type": "object",
        "properties": {
            "runId": {
                "description": "at most 200 bytes of UTF-8 (shared/limits.py), no NUL",
                "type": "string",
                "minLength": 1,
                "maxLength": 200,
            },
            "delay": {
                "description": "a duration ('10s', '3d') or milliseconds",
                "type": ["string", "integer"],
            },
            "debounce": DEBOUNCE,
            "priority": PRIORITY,
            "queue": {"type": "string"},
            "parentId": {
                "description": "record the new job as a child of this job (it takes the "
                "parent's tenant; a cancel of the parent cancels it): an operator token only "
                "(a tenant token is 403 X_FORBIDDEN); a missing parent is 404 X_JOB_NOT_FOUND",
                "type": "string",
                "minLength": 1,
                "maxLength": 200,
            },
            "onConflict": {
                "description": "dedupe (default): a live run holding the idempotency key is the "
                "answer (deduped: true); error: that run is 409 X_JOB_DUPLICATE, meta.id naming it",
                "type": "string",
                "enum": ["dedupe", "error"],
            },
        },
    },
    "JobResultError": {
        "description": "why a job ended without a result: its own X_ code as its last error "
        "names it (X_JOB_FAILED when it names none) and the message without the stack",
        "type": "object",
        "required": ["code", "message"],
        "properties": {
            "code": {"type": "string", "pattern": "^X_[A-Z0-9_]+$"},
            "message": {"type": "string"},
        },
    },
    "JobResult": {
        "description": "a job's result: 200 once the job is finished, 202 while it is live "
        "(result and error null)",
        "type": "object",
        "required": ["id", "name", "state", "result", "error"],
        "properties": {
            "id": {"type": "string"},
            "name": {"type": "string"},
            "state": {"type": "string", "enum": list(ALL_STATES)},
            "result": {
                "description": "what the body returned (JSON) when state is done; null "
                "otherwise, and for a body that returned nothing"
            },
            "error": {"anyOf": [{"$ref": "#/components/schemas/JobResultError"}, {"type": "null"}]},
        },
    },
    "EnqueuedResult": {
        "description": "POST /v1/jobs/{name}?wait=: the enqueue's answer and the run's result",
        "allOf": [
            {"$ref": "#/components/schemas/Enqueued"},
            {"$ref": "#/components/schemas/JobResult"},
        ],
    },
    "Job": _JOB,
    "JobDocument": {
        "allOf": [{"$ref": "#/components/schemas/Job"}],
        "type": "object",
        "required": ["input", "inputRedacted", "steps", "attempts"],
        "properties": {
            "input": {"description": "the input's keys, every value masked"},
            "inputRedacted": {"type": "boolean"},
            "result": {
                "description": "what the body returned (JSON) once done, null before (GET "
                "/v1/jobs/{id}/result waits for it)"
            },
            "parentId": {
                "description": "the job that enqueued this one as a step (run.step.enqueue)",
                "type": ["string", "null"],
            },
            "children": {
                "description": "the jobs this one enqueued as steps: the first 50 in the order "
                "they were enqueued, and how many there are (null: the driver keeps none)",
                "anyOf": [{"$ref": "#/components/schemas/JobChildren"}, {"type": "null"}],
            },
            "attempts": {
                "description": "each counted failed attempt's error, oldest first (the newest "
                "10, each cut to 4,000 characters; a tenant token reads them without the stack)",
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["attempt", "atMs", "error"],
                    "properties": {
                        "attempt": {"type": "integer"},
                        "atMs": {"type": "integer"},
                        "error": {"type": ["string", "null"]},
                    },
                },
            },
            "steps": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["name", "seq"],
                    "properties": {
                        "name": {"type": "string"},
                        "seq": {"type": "integer"},
                        "startedAtMs": {"type": "integer"},
                        "finishedAtMs": {"type": "integer"},
                        "durationMs": {"type": "integer"},
                    },
                },
            },
        },
    },
    "JobChildren": {
        "type": "object",
        "required": ["items", "total"],
        "properties": {
            "items": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["id", "name", "state", "createdAtMs"],
                    "properties": {
                        "id": {"type": "string"},
                        "name": {"type": "string"},
                        "state": {"type": "string", "enum": list(ALL_STATES)},
                        "createdAtMs": {"type": "integer"},
                    },
                },
            },
            "total": {"type": "integer"},
        },
    },
    "JobPage": {
        "type": "object",
        "required": ["jobs", "limit", "last", "next", "prev"],
        "properties": {
            "jobs": {"type": "array", "items": {"$ref": "#/components/schemas/Job"}},
            "limit": {"type": "integer"},
            "last": {"type": "boolean"},
            "next": _NULLABLE_STRING,
            "prev": _NULLABLE_STRING,
        },
    },
    "Removed": {
        "type": "object",
        "required": ["id", "removed"],
        "properties": {"id": {"type": "string"}, "removed": {"const": True}},
    },
    "Queues": {
        "type": "object",
        "required": ["queues"],
        "properties": {"queues": {"type": "array", "items": {"type": "object"}}},
    },
    "QueueTenantsRead": {
        "type": "object",
        "description": "one queue as GET /v1/queues lists it, plus whose due work waits in it",
        "required": ["queue", "tenants", "tenantsCapped"],
        "properties": {
            "queue": {"type": "string"},
            "tenants": {
                "type": "array",
                "items": {"$ref": "#/components/schemas/TenantBacklog"},
            },
            "tenantsCapped": {
                "description": (
                    "only the first 10,000 due jobs in hand-out order were read: counts are lower"
                    " bounds"
                ),
                "type": "boolean",
            },
        },
        "additionalProperties": True,
    },
    "TenantBacklog": {
        "type": "object",
        "required": ["tenantId", "due", "oldestDueAgeMs"],
        "properties": {
            "tenantId": _NULLABLE_STRING,
            "due": {"type": "integer"},
            "oldestDueAgeMs": {"type": "integer"},
        },
    },
    "TenantWeight": {
        "type": "object",
        "description": "a tenant's weight in the fair claim: its share of a contended queue",
        "required": ["tenantId", "weight"],
        "properties": {
            "tenantId": {"type": "string", "minLength": 1, "maxLength": 200},
            "weight": {"type": "integer", "minimum": 1, "maximum": 1000},
        },
    },
    "TenantWeightSet": {
        "type": "object",
        "description": "the weight to set: 1 (the default) to 1000",
        "required": ["weight"],
        "additionalProperties": False,
        "properties": {"weight": {"type": "integer", "minimum": 1, "maximum": 1000}},
    },
    "Paused": {
        "type": "object",
        "required": ["paused"],
        "properties": {
            "queues": {"type": "array", "items": {"type": "string"}},
            "tasks": {"type": "array", "items": {"type": "string"}},
            "paused": {"type": "boolean"},
        },
    },
    "Tokens": {
        "type": "object",
        "required": ["tokens"],
        "properties": {
            "tokens": {"type": "array", "items": {"$ref": "#/components/schemas/Token"}}
        },
    },
    "Token": {
        "type": "object",
        "required": [
            "id",
            "name",
            "tenant",
            "operator",
            "scopes",
            "createdAtMs",
            "expiresAtMs",
            "revokedAtMs",
        ],
        "properties": {
            "id": {"type": "string"},
            "name": _NULLABLE_STRING,
            "tenant": _NULLABLE_STRING,
            "operator": {"type": "boolean"},
            "scopes": {"type": "array", "items": {"type": "string"}},
            "createdAtMs": {"type": "integer"},
            "expiresAtMs": {"type": ["integer", "null"]},
            "revokedAtMs": {"type": ["integer", "null"]},
        },
    },
    "Tasks": {
        "type": "object",
        "required": ["tasks"],
        "properties": {"tasks": {"type": "array", "items": {"type": "object"}}},
    },
    "Event": {
        "type": "object",
        "required": ["id", "name", "publishedAtMs", "expiresAtMs"],
        "properties": {
            "id": {"type": "string"},
            "name": {"type": "string"},
            "publishedAtMs": {"type": "integer"},
            "expiresAtMs": {"type": "integer"},
        },
    },
}
