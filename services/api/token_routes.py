"""The api's tokens over HTTP: what ``ujobs tokens list`` prints, for an operator CLI that
reaches the api with ``UJOBS_URL`` + ``UJOBS_TOKEN`` and no ``DATABASE_URL``.

| Route | Token | Answers (the CLI's ``--json`` document) |
|---|---|---|
| ``GET /v1/tokens`` | an operator token with ``admin`` | ``{"tokens": [...]}``: id, name, tenant, scopes, created, expiry, revocation; never a secret |

Tokens span every tenant, so a tenant token is 403 ``X_FORBIDDEN`` whatever its scopes. Minting
and revoking stay on the command line (``ujobs tokens create | revoke`` with DATABASE_URL): a
leaked admin token can read the list, never make itself a new one.
"""  # noqa: E501

from __future__ import annotations

from aiohttp import web

from ujobs.errors import DriverUnavailableError
from ujobs.services.api.common import BACKEND, EDGE, caller, json_ok
from ujobs.services.api.tokens import TokenStore

routes = web.RouteTableDef()


@routes.get("/v1/tokens")
async def tokens(request: web.Request) -> web.Response:
    principal = await caller(request, "admin")
    principal.require_operator("listing tokens")
    pool = request.app[BACKEND].pool
    if pool is None:
        raise DriverUnavailableError(
            "the api's tokens live in Postgres; set DATABASE_URL", meta={"variable": "DATABASE_URL"}
        )
    store = TokenStore(pool, clock=request.app[EDGE].driver.clock)
    return json_ok({"tokens": [r.to_json() for r in await store.list()]})


__all__ = ["routes"]
