"""What every route module of the api shares: the app's typed keys, the error envelope and its
statuses, reading a JSON body, and authenticating the caller.

Errors are ``{"error": {"code", "message", "meta"}}`` with the status ``status_for(code)``
names (DESIGN.md § HTTP). A route raises the ``UltimateError`` and the api's middleware writes
the envelope, so no handler builds an error response by hand.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

from ujobs.drivers.base import JobDriver
from ujobs.errors import InputInvalidError, UltimateError
from ujobs.jobs.registry import Registry
from ujobs.limits import depth_refused, too_deep_to_parse
from ujobs.metrics import JobMetrics
from ujobs.services.api.auth import Principal, TokenLookup, authenticate
from ujobs.services.api.enqueue_batcher import EnqueueBatcher
from ujobs.services.api.ratelimit import TokenBuckets
from ujobs.services.api.strict_batch import StrictBatch
from ujobs.services.api.token_facts import KnownTokens
from ujobs.services.config.settings import ApiConfig
from ujobs.services.redact import redact_text
from ujobs.services.runtime.backends import Backend

_STATUS_BY_CODE = {
    "X_INPUT_INVALID": 400,
    "X_CONFIG_INVALID": 400,
    "X_JOB_PAGE_INVALID": 400,
    "X_JOB_DECLARATION_INVALID": 400,
    "X_JOB_TENANT_REQUIRED": 400,
    "X_IDEMPOTENCY_REQUIRED": 400,
    "X_WEBHOOK_ENDPOINT_INVALID": 400,
    "X_WEBHOOK_EVENT_INVALID": 400,
    "X_UNAUTHORIZED": 401,
    "X_FORBIDDEN": 403,
    "X_JOB_TENANT_MISMATCH": 403,
    "X_TENANCY_ACTOR_MISMATCH": 403,
    "X_NOT_FOUND": 404,
    "X_JOB_NOT_FOUND": 404,
    "X_STEP_NOT_FOUND": 404,
    "X_JOB_ID_AMBIGUOUS": 409,
    "X_JOB_UNKNOWN": 404,
    "X_TASK_UNKNOWN": 404,
    "X_WEBHOOK_ENDPOINT_UNKNOWN": 404,
    "X_METHOD_NOT_ALLOWED": 405,
    "X_JOB_DUPLICATE": 409,
    "X_ENQUEUE_OPTION_UNSUPPORTED": 400,
    "X_PRIORITY_INVALID": 400,
    "X_JOB_NOT_REQUEUEABLE": 409,
    "X_JOB_NOT_REMOVABLE": 409,
    "X_JOB_NOT_PROMOTABLE": 409,
    "X_JOB_NOT_CANCELLABLE": 409,
    "X_BODY_TOO_LARGE": 413,
    "X_RATE_LIMITED": 429,
    "X_NOT_IMPLEMENTED": 501,
    "X_DRIVER_UNSUPPORTED": 501,
    "X_DRAINING": 503,
    "X_DRIVER_UNAVAILABLE": 503,
    "X_DRIVER_UNREACHABLE": 503,
    "X_SCHEMA_OUTDATED": 503,
    "X_JOB_ROW_STATUS_UNKNOWN": 503,  # a newer release wrote the row, as X_SCHEMA_OUTDATED
    "X_OVERLOADED": 503,
}


def status_for(code: str) -> int:
    """The HTTP status an error code travels with (500 for a code nobody mapped)."""
    return _STATUS_BY_CODE.get(code, 500)


UNAVAILABLE_RETRY_AFTER_S = 1
"""``Retry-After`` of a 503: a Postgres restart takes about a second (bench/RESULTS.md)."""
TRANSIENT_CODES = frozenset({"X_DRAINING", "X_DRIVER_UNREACHABLE", "X_OVERLOADED"})
"""The 503s that pass by themselves: another replica takes the traffic, Postgres comes back,
the load falls. The others (``X_SCHEMA_OUTDATED``, ``X_DRIVER_UNAVAILABLE`` naming an unset
``DATABASE_URL``) wait for an operator, so a ``Retry-After`` on them would only set every
client's retry loop spinning against a refusal that cannot change."""


def error_response(
    error: UltimateError,
    status: int | None = None,
    headers: dict[str, str] | None = None,
    *,
    transient: bool | None = None,
) -> web.Response:
    """The envelope; a transient 503 (``TRANSIENT_CODES``, or ``transient=True`` from a caller
    that knows better than the code, like ``/readyz`` whose ping went unanswered) says when to
    try again with ``Retry-After`` unless ``headers`` name one."""
    body: dict[str, Any] = {"error": {**error.to_dict(), "message": redact_text(error.message)}}
    try:
        encoded = orjson.dumps(body)
    except orjson.JSONEncodeError:
        # A meta echoing what the request sent (a number past 64 bits) must not turn the
        # refusal into a 500: the code and the message still say what was wrong.
        body["error"]["meta"] = {}
        encoded = orjson.dumps(body)
    status = status or status_for(error.code)
    if transient is None:
        transient = error.code in TRANSIENT_CODES
    if status == 503 and transient:
        headers = {"Retry-After": str(UNAVAILABLE_RETRY_AFTER_S), **(headers or {})}
    return web.Response(
        body=encoded, status=status, headers=headers, content_type="application/json"
    )


class BodyTooLargeError(UltimateError):
    code = "X_BODY_TOO_LARGE"


@dataclass
class ApiState:
    """Mutable per-app state: the drain flag and the metrics refresh's bookkeeping."""

    metrics: JobMetrics
    draining: bool = False
    refreshed_at: float | None = None
    refresh_lock: asyncio.Lock = field(default_factory=asyncio.Lock)


@dataclass(frozen=True, slots=True)
class Edge:
    """What the routes run on, built when the backend opens: the driver enqueues go through
    (announcing), the token store, the per-token buckets and the enqueue batcher."""

    driver: JobDriver
    tokens: TokenLookup
    buckets: TokenBuckets
    batcher: EnqueueBatcher
    strict: StrictBatch | None = None
    """All-or-none batches (``/batch`` under ``onConflict: error``); None off Postgres."""
    known: KnownTokens | None = None
    """Tokens' fixed facts, kept when the batcher can check revocation inside the enqueue
    (``batcher.guard``); None: every request reads its token."""


CONFIG = web.AppKey("config", ApiConfig)
BACKEND = web.AppKey("backend", Backend)
REGISTRY = web.AppKey("registry", Registry)
STATE = web.AppKey("state", ApiState)
EDGE = web.AppKey("edge", Edge)


async def read_json(request: web.Request) -> Any:
    """The body as JSON: over ``UJOBS_API_MAX_BODY_BYTES`` is 413, not JSON is 400."""
    limit = request.app[CONFIG].max_body_bytes
    if request.content_length is not None and request.content_length > limit:
        raise _too_large(limit, request.content_length)
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise _too_large(limit, None) from None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        if too_deep_to_parse(exc):
            raise depth_refused("the body", "") from None
        raise InputInvalidError(
            f"the body is not JSON ({exc.msg} at character {exc.pos}); send a JSON object",
            meta={"issues": [{"path": "", "message": "not JSON"}]},
        ) from None


def _too_large(limit: int, length: int | None) -> BodyTooLargeError:
    return BodyTooLargeError(
        f"the body is over {limit} bytes (UJOBS_API_MAX_BODY_BYTES); send fewer inputs per request",
        meta={"max": limit, "length": length},
    )


async def read_object(request: web.Request, allowed: frozenset[str]) -> dict[str, Any]:
    """The body as a JSON object whose keys are all in ``allowed`` (a typo is 400, never a
    silently ignored option)."""
    body = await read_json(request)
    if not isinstance(body, dict):
        raise InputInvalidError(
            "the body must be a JSON object", meta={"issues": [{"path": "", "message": "object"}]}
        )
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise InputInvalidError(
            f"unknown field(s) {', '.join(unknown)}; this route reads {', '.join(sorted(allowed))}",
            meta={"issues": [{"path": k, "message": "unknown field"} for k in unknown]},
        )
    return body


async def caller(request: web.Request, scope: str | None = None) -> Principal:
    """The authenticated token behind the request (401), within its rate (429), holding
    ``scope`` when one is named (403)."""
    edge = request.app[EDGE]
    principal = await authenticate(
        edge.tokens, request.headers.get("Authorization"), edge.driver.clock.now_ms()
    )
    edge.buckets.take(principal.token_id)
    if scope is not None:
        principal.require(scope)
    return principal


def json_ok(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    """A JSON response encoded by orjson (a 500-row batch's answer is several times faster to
    encode than with the standard library's encoder)."""
    return web.Response(
        body=orjson.dumps(body), status=status, headers=headers, content_type="application/json"
    )


def accepted(body: Any) -> web.Response:
    return json_ok(body, status=202)


__all__ = [
    "BACKEND",
    "CONFIG",
    "EDGE",
    "REGISTRY",
    "STATE",
    "TRANSIENT_CODES",
    "UNAVAILABLE_RETRY_AFTER_S",
    "ApiState",
    "BodyTooLargeError",
    "Edge",
    "caller",
    "error_response",
    "json_ok",
    "read_json",
    "read_object",
    "status_for",
]
