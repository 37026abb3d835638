"""``/_x/webhooks``: the endpoints and each one's delivery attempts, read and moved through the
store ``ujobs webhooks endpoints list|disable|enable`` and ``ujobs webhooks deliveries`` use
(``ujobs.webhooks.store_pg.PgWebhookStore``).

| Page | Reads | Who |
|---|---|---|
| ``/_x/webhooks`` | ``endpoints`` and each one's newest attempt | any; a tenant sees its own |
| ``/_x/webhooks/{endpoint}`` | the endpoint and ``deliveries`` (``?failed=1``: failures only) | any; another tenant's is 404 |

No page shows a secret: ``EndpointInfo`` carries none, and of the endpoint's own headers only
the names are shown (a header may carry a credential). The store is built as the CLI builds
it, from ``UJOBS_SECRET_KEY`` (it seals secrets; these pages never open one); without the key
the webhook pages say so and every other page works.
"""  # noqa: E501

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from ujobs.errors import UltimateError
from ujobs.services.api.auth import Principal
from ujobs.services.api.common import BACKEND, EDGE
from ujobs.services.config.settings import environment
from ujobs.services.dashboard.render import page
from ujobs.services.dashboard.session import PREFIX, viewer
from ujobs.services.dashboard.views import flash, guarded
from ujobs.services.webhook_deliverer import WebhookSettings, webhook_settings
from ujobs.webhooks.errors import WebhookEndpointUnknownError
from ujobs.webhooks.store_pg import EndpointInfo, PgWebhookStore

routes = web.RouteTableDef()

DELIVERIES_SHOWN = 50


@dataclass(frozen=True, slots=True)
class WebhookAccess:
    """What the webhook pages open the store with, or why they cannot."""

    settings: WebhookSettings | None
    problem: UltimateError | None

    @classmethod
    def from_environment(cls) -> WebhookAccess:
        try:
            return cls(settings=webhook_settings(environment()), problem=None)
        except UltimateError as exc:
            return cls(settings=None, problem=exc)


WEBHOOKS = web.AppKey("dashboard_webhooks", WebhookAccess)


def webhook_store(request: web.Request) -> PgWebhookStore:
    """The store over the api's pool, as ``ujobs webhooks`` opens it."""
    access = request.app[WEBHOOKS]
    if access.settings is None:
        assert access.problem is not None
        raise access.problem
    pool = request.app[BACKEND].require_pool("the webhook pages")
    return PgWebhookStore(
        pool,
        access.settings.box,
        clock=request.app[EDGE].driver.clock,
        policy=access.settings.policy,
    )


async def visible_endpoint(
    store: PgWebhookStore, principal: Principal, endpoint_id: str
) -> EndpointInfo:
    """The endpoint if this token may see it; another tenant's is the same 404 as none."""
    for endpoint in await store.endpoints(principal.tenant_id):
        if endpoint.id == endpoint_id:
            return endpoint
    raise WebhookEndpointUnknownError(
        f"no endpoint {endpoint_id!r}; the webhooks page lists them",
        meta={"endpoint_id": endpoint_id},
    )


async def set_endpoint_state(
    request: web.Request, principal: Principal, endpoint_id: str, *, enabled: bool
) -> None:
    """``ujobs webhooks endpoints enable|disable``, on an endpoint this token sees."""
    store = webhook_store(request)
    await visible_endpoint(store, principal, endpoint_id)
    if enabled:
        await store.enable(endpoint_id)
    else:
        await store.disable(endpoint_id)


@routes.get(PREFIX + "/webhooks")
@guarded
async def endpoints(request: web.Request) -> web.Response:
    principal, secret = await viewer(request)
    store = webhook_store(request)
    listed = await store.endpoints(principal.tenant_id)
    newest = await store.newest_deliveries([endpoint.id for endpoint in listed])
    rows = [{**endpoint.to_dict(), "last": newest.get(endpoint.id)} for endpoint in listed]
    return page(
        request,
        "webhooks.html",
        principal=principal,
        secret=secret,
        endpoints=rows,
        flash=flash(request),
    )


@routes.get(PREFIX + "/webhooks/{endpoint}")
@guarded
async def endpoint(request: web.Request) -> web.Response:
    principal, secret = await viewer(request)
    store = webhook_store(request)
    found = await visible_endpoint(store, principal, request.match_info["endpoint"])
    failed_only = request.query.get("failed") == "1"
    attempts = await store.deliveries(found.id, failed_only=failed_only, limit=DELIVERIES_SHOWN)
    return page(
        request,
        "webhook.html",
        principal=principal,
        secret=secret,
        endpoint=found.to_dict(),
        attempts=attempts,
        failed_only=failed_only,
        shown=DELIVERIES_SHOWN,
        flash=flash(request),
    )


def install(app: web.Application) -> None:
    app[WEBHOOKS] = WebhookAccess.from_environment()
    app.add_routes(routes)


__all__ = [
    "WEBHOOKS",
    "WebhookAccess",
    "install",
    "routes",
    "set_endpoint_state",
    "visible_endpoint",
    "webhook_store",
]
