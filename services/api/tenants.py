"""Tenant weights over HTTP: the functions ``ujobs tenants weight`` calls.

| Route | Scope | Answers |
|---|---|---|
| ``GET /v1/tenants/{tenant}/weight`` | ``read`` | ``TenantWeight``: ``{"tenantId", "weight"}`` |
| ``PUT /v1/tenants/{tenant}/weight`` | ``operate`` | ``TenantWeight``, from a ``TenantWeightSet`` body ``{"weight": 1..1000}`` |

Tenancy: a weight decides one tenant's share against every other's, so only an operator token
reads or sets one. A tenant token is answered 404 ``X_NOT_FOUND``, exactly as a path that does
not exist: it learns nothing, not even that the route is there. A tenant id past 200 bytes, a
weight outside 1..1000 or a body that is not ``{"weight": n}`` is 400 ``X_INPUT_INVALID``; the
body is read within ``MAX_BODY_BYTES``.
"""  # noqa: E501

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from ujobs.errors import InputInvalidError
from ujobs.introspect import set_tenant_weight, tenant_weight
from ujobs.services.api.common import EDGE, caller, json_ok

routes = web.RouteTableDef()

MAX_BODY_BYTES = 1024
"""The most bytes a ``TenantWeightSet`` body may take (``{"weight": 1000}`` is 16)."""


async def _operator(request: web.Request, scope: str) -> None:
    """An operator token holding ``scope``; any tenant token is the route's not-found."""
    principal = await caller(request)
    if not principal.operator:
        raise web.HTTPNotFound()
    principal.require(scope)


def _invalid(message: str) -> InputInvalidError:
    return InputInvalidError(message, meta={"issues": [{"path": "weight", "message": message}]})


async def _body(request: web.Request) -> Any:
    raw = await request.content.read(MAX_BODY_BYTES + 1)
    if len(raw) > MAX_BODY_BYTES:
        raise _invalid(f'the body is over {MAX_BODY_BYTES} bytes; send {{"weight": n}}')
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise _invalid('the body is not JSON; send {"weight": n}') from None
    if not isinstance(body, dict) or set(body) != {"weight"}:
        raise _invalid('the body must be {"weight": n}, n from 1 to 1000')
    return body["weight"]


@routes.get("/v1/tenants/{tenant}/weight")
async def get_weight(request: web.Request) -> web.Response:
    await _operator(request, "read")
    driver = request.app[EDGE].driver
    return json_ok(await tenant_weight(driver, request.match_info["tenant"]))


@routes.put("/v1/tenants/{tenant}/weight")
async def put_weight(request: web.Request) -> web.Response:
    await _operator(request, "operate")
    weight = await _body(request)
    driver = request.app[EDGE].driver
    return json_ok(await set_tenant_weight(driver, request.match_info["tenant"], weight))


__all__ = ["MAX_BODY_BYTES", "routes"]
