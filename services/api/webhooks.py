"""Webhook endpoints over HTTP: the ``PgWebhookStore`` functions ``ujobs webhooks endpoints``
and ``ujobs webhooks deliveries`` call (one implementation, two faces), behind a token.

| Route | Scope | Answers (the CLI's ``--json`` document) |
|---|---|---|
| ``GET /v1/webhooks/endpoints?tenantId=`` | ``read`` | ``{"endpoints": [...]}``, never a secret (``endpoints list``) |
| ``POST /v1/webhooks/endpoints`` ``{"url", "topics"?, "scheme"?, "payload"?, "headers"?, "description"?, "ratePerS"?, "tenantId"?}`` | ``operate`` | 201 ``{"id", "secret"}``: the secret, this once (``endpoints add``) |
| ``POST /v1/webhooks/endpoints/{endpoint}/disable`` · ``/enable`` | ``operate`` | ``{"id", "disabled"}`` |
| ``POST /v1/webhooks/endpoints/{endpoint}/rotate-secret`` ``{"graceHours"?}`` | ``operate`` | ``{"id", "secret"}``: the new secret, this once |
| ``GET /v1/webhooks/endpoints/{endpoint}/deliveries?failed=&limit=`` | ``read`` | ``{"deliveries": [...]}``, newest first (``deliveries``) |

A tenant token sees and changes only its own tenant's endpoints: another tenant's endpoint is
``X_WEBHOOK_ENDPOINT_UNKNOWN`` (404, as if it did not exist), a list is its tenant's, and an
endpoint it adds is its tenant's (naming another tenant is ``X_TENANCY_ACTOR_MISMATCH``) under
an id the server chooses: ids are one namespace across tenants, so an ``id`` from a tenant token
is refused (400 ``X_WEBHOOK_ENDPOINT_INVALID``) whether another tenant holds it or not. A
secret leaves only in the answer of the call that made it; a header's value never leaves.
Secrets are sealed under ``UJOBS_SECRET_KEY`` (or ``UJOBS_SECRET_KEY_FILE``): an api without
it answers these routes 503 ``X_DRIVER_UNAVAILABLE`` naming the variable; an api given a key
that is not one (32 base64 bytes) refuses to start with ``X_CONFIG_INVALID``, as every service
reading the key does.
"""  # noqa: E501

from __future__ import annotations

import math
from typing import Any

from aiohttp import web

from ujobs.errors import (
    DriverUnavailableError,
    InputInvalidError,
    TenancyActorMismatchError,
    WebhookEndpointInvalidError,
)
from ujobs.limits import check_text
from ujobs.services.api.auth import Principal
from ujobs.services.api.common import BACKEND, EDGE, caller, json_ok, read_object
from ujobs.services.runtime.secret_key import secret_key_text
from ujobs.services.webhook_deliverer import WebhookSettings, webhook_settings
from ujobs.webhooks.errors import WebhookEndpointUnknownError
from ujobs.webhooks.store_pg import ROTATION_GRACE_MS, PgWebhookStore

routes = web.RouteTableDef()

SETTINGS = web.AppKey("webhook_settings", WebhookSettings)
MAX_DELIVERIES_PAGE = 1_000
DEFAULT_DELIVERIES_PAGE = 50
MAX_GRACE_HOURS = 24 * 30
_ADD_FIELDS = frozenset(
    {"url", "topics", "scheme", "payload", "headers", "description", "ratePerS", "tenantId", "id"}
)


def _store(request: web.Request) -> PgWebhookStore:
    settings = request.app.get(SETTINGS)
    if settings is None:
        raise DriverUnavailableError(
            "webhook endpoints are sealed at rest and this api has no key: set UJOBS_SECRET_KEY or "
            "UJOBS_SECRET_KEY_FILE to a key from `ujobs webhooks new-key`",
            meta={"variable": "UJOBS_SECRET_KEY"},
        )
    pool = request.app[BACKEND].require_pool("webhook endpoints")
    clock = request.app[EDGE].driver.clock
    return PgWebhookStore(pool, settings.box, clock=clock, policy=settings.policy)


def _issue(path: str, message: str) -> dict[str, Any]:
    return {"issues": [{"path": path, "message": message}]}


def _field(body: dict[str, Any], key: str, kind: type | tuple[type, ...], what: str) -> Any:
    value = body.get(key)
    if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
        raise InputInvalidError(f"{key} must be {what}", meta=_issue(key, what))
    return value


def _strings(body: dict[str, Any], key: str) -> list[str] | None:
    value: list[str] | None = _field(body, key, list, "an array of strings")
    if value is not None and not all(isinstance(v, str) for v in value):
        raise InputInvalidError(f"{key} must be an array of strings", meta=_issue(key, "strings"))
    return value


def _string_map(body: dict[str, Any], key: str) -> dict[str, str]:
    value = _field(body, key, dict, "an object of strings") or {}
    if not all(isinstance(v, str) for v in value.values()):
        raise InputInvalidError(f"{key} maps names to strings", meta=_issue(key, "strings"))
    return dict(value)


def _tenant_of_new(body: dict[str, Any], principal: Principal) -> str | None:
    named: str | None = _field(body, "tenantId", str, "a string")
    if principal.operator:
        # Past its limit before the insert: the tenant index holds it (as the jobs' does).
        return None if named is None else check_text("tenant", named)
    if named is not None and named != principal.tenant_id:
        raise TenancyActorMismatchError(
            f"this token acts for {principal.tenant_id!r}; it adds endpoints of its own tenant "
            "only (leave tenantId out)",
            meta={"tenant": named, "actor_org": principal.tenant_id},
        )
    return principal.tenant_id


def _id_of_new(body: dict[str, Any], principal: Principal) -> str | None:
    """The id an operator chose, if any. Endpoint ids are one namespace across tenants, so a
    tenant token never chooses one: "already exists" would tell it another tenant holds that
    id. It is refused whatever the id, taken or free, so the answer says nothing of others."""
    chosen: str | None = _field(body, "id", str, "a string")
    if chosen is not None and principal.operator:
        check_text("endpointId", chosen)
    if chosen is not None and not principal.operator:
        raise WebhookEndpointInvalidError(
            "a tenant token does not choose an endpoint's id (ids are shared by every tenant); "
            "leave id out and keep the id the answer gives",
            meta=_issue("id", "chosen by the server for a tenant token"),
        )
    return chosen


async def _visible(store: PgWebhookStore, request: web.Request, principal: Principal) -> str:
    """``{endpoint}`` if this token may see it; otherwise the same 404 as no endpoint."""
    endpoint_id = request.match_info["endpoint"]
    found = await store.endpoint(endpoint_id)
    if found is None or not principal.sees(found[1]):
        raise WebhookEndpointUnknownError(
            f"no endpoint {endpoint_id!r}; GET /v1/webhooks/endpoints lists them",
            meta={"endpoint_id": endpoint_id},
        )
    return endpoint_id


@routes.get("/v1/webhooks/endpoints")
async def list_endpoints(request: web.Request) -> web.Response:
    principal = await caller(request, "read")
    unknown = sorted(set(request.query) - {"tenantId"})
    if unknown:
        raise InputInvalidError(
            f"unknown parameter(s) {', '.join(unknown)}; this route reads tenantId",
            meta={"issues": [{"path": k, "message": "unknown parameter"} for k in unknown]},
        )
    tenant = request.query.get("tenantId") if principal.operator else principal.tenant_id
    found = await _store(request).endpoints(tenant)
    return json_ok({"endpoints": [e.to_dict() for e in found]})


@routes.post("/v1/webhooks/endpoints")
async def add_endpoint(request: web.Request) -> web.Response:
    principal = await caller(request, "operate")
    body = await read_object(request, _ADD_FIELDS)
    url = _field(body, "url", str, "a string")
    if url is None:
        raise InputInvalidError("url is required", meta=_issue("url", "required"))
    rate = _field(body, "ratePerS", (int, float), "a number")
    topics = _strings(body, "topics")
    created = await _store(request).add_endpoint(
        url,
        tenant=_tenant_of_new(body, principal),
        topics=["*"] if topics is None else topics,
        scheme=_field(body, "scheme", str, "a string") or "standard",
        headers=_string_map(body, "headers"),
        description=_field(body, "description", str, "a string") or "",
        endpoint_id=_id_of_new(body, principal),
        rate_per_s=None if rate is None else float(rate),
        payload=_field(body, "payload", str, "a string"),
    )
    return json_ok({"id": created.id, "secret": created.secret}, status=201)


async def _set_disabled(request: web.Request, *, disabled: bool) -> web.Response:
    principal = await caller(request, "operate")
    store = _store(request)
    endpoint_id = await _visible(store, request, principal)
    if disabled:
        await store.disable(endpoint_id)
    else:
        await store.enable(endpoint_id)
    return json_ok({"id": endpoint_id, "disabled": disabled})


@routes.post("/v1/webhooks/endpoints/{endpoint}/disable")
async def disable_endpoint(request: web.Request) -> web.Response:
    return await _set_disabled(request, disabled=True)


@routes.post("/v1/webhooks/endpoints/{endpoint}/enable")
async def enable_endpoint(request: web.Request) -> web.Response:
    return await _set_disabled(request, disabled=False)


@routes.post("/v1/webhooks/endpoints/{endpoint}/rotate-secret")
async def rotate_secret(request: web.Request) -> web.Response:
    principal = await caller(request, "operate")
    body = await read_object(request, frozenset({"graceHours"})) if request.body_exists else {}
    hours = _field(body, "graceHours", (int, float), "a number")
    grace_ms = ROTATION_GRACE_MS
    if hours is not None:
        if not (math.isfinite(hours) and 0 <= hours <= MAX_GRACE_HOURS):
            raise InputInvalidError(
                f"graceHours must be from 0 to {MAX_GRACE_HOURS}",
                meta=_issue("graceHours", "range"),
            )
        grace_ms = int(hours * 3_600_000)
    store = _store(request)
    endpoint_id = await _visible(store, request, principal)
    secret = await store.rotate_secret(endpoint_id, grace_ms=grace_ms)
    return json_ok({"id": endpoint_id, "secret": secret})


def _page(query: Any) -> tuple[bool, int]:
    unknown = sorted(set(query) - {"failed", "limit"})
    if unknown:
        raise InputInvalidError(
            f"unknown parameter(s) {', '.join(unknown)}; this route reads failed, limit",
            meta={"issues": [{"path": k, "message": "unknown parameter"} for k in unknown]},
        )
    failed = query.get("failed", "false")
    if failed not in ("true", "false"):
        raise InputInvalidError("failed must be true or false", meta=_issue("failed", "boolean"))
    raw = query.get("limit", str(DEFAULT_DELIVERIES_PAGE))
    if not (raw.isascii() and raw.isdigit() and 1 <= int(raw) <= MAX_DELIVERIES_PAGE):
        raise InputInvalidError(
            f"limit must be a whole number from 1 to {MAX_DELIVERIES_PAGE}",
            meta=_issue("limit", "range"),
        )
    return failed == "true", int(raw)


@routes.get("/v1/webhooks/endpoints/{endpoint}/deliveries")
async def deliveries(request: web.Request) -> web.Response:
    principal = await caller(request, "read")
    failed_only, limit = _page(request.query)
    store = _store(request)
    endpoint_id = await _visible(store, request, principal)
    found = await store.deliveries(endpoint_id, failed_only=failed_only, limit=limit)
    return json_ok({"deliveries": [a.to_dict() for a in found]})


def add_webhook_routes(app: web.Application, settings: WebhookSettings | None = None) -> None:
    """Serve the endpoint routes on ``app`` (the api's). ``settings`` default to the
    environment's. With no key these routes answer 503 saying so; a key that cannot seal is
    ``X_CONFIG_INVALID`` here, at start (its message names the variable, never the value)."""
    if settings is None:
        from ujobs.services.config.settings import environment

        env = environment()
        if secret_key_text(env) is not None:
            settings = webhook_settings(env)
    if settings is not None:
        app[SETTINGS] = settings
    app.add_routes(routes)


__all__ = ["SETTINGS", "add_webhook_routes", "routes"]
