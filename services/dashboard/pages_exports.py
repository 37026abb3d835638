"""``/_x/exports``: the exports (the jobs of the exports queue) and one export's manifest with
its download links, over the functions ``ujobs exports list|show`` and ``GET /v1/exports/{id}``
call (``list_jobs`` on ``EXPORTS_QUEUE``; ``find_export``, ``read_manifest``,
``describe_export``).

| Page | Shows | Who |
|---|---|---|
| ``/_x/exports`` | one keyset page of exports, newest first | any; a tenant sees its own |
| ``/_x/exports/{id}`` | the export's job, its manifest, a download link per part | any; another tenant's is 404 |

A part's link is the one ``GET /v1/exports/{id}`` hands out: the store's presigned URL, or on
the filesystem the api's own ``/v1/exports/{id}/parts/{n}`` signed with ``UJOBS_SECRET_KEY``
(``sign_path``) for ``LINK_TTL``. The link is the credential, so it downloads in the viewer's
browser without the cookie; without the key such parts show no link.
"""  # noqa: E501

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web

from ujobs.drivers.base import JobFilter
from ujobs.exports.downloads import describe_export, find_export, read_manifest
from ujobs.exports.family import EXPORTS_QUEUE
from ujobs.introspect import introspection_of
from ujobs.services.api.common import EDGE, REGISTRY
from ujobs.services.api.exports import LINK_TTL, SETTINGS, part_path, sign_path
from ujobs.services.dashboard.pages import PAGE_SIZE, one_page, pager, row_view
from ujobs.services.dashboard.render import page
from ujobs.services.dashboard.session import PREFIX, viewer
from ujobs.services.dashboard.views import guarded

routes = web.RouteTableDef()


def signed_links(request: web.Request, export_id: str) -> Callable[[int], str | None]:
    """Part ``n``'s signed api link, as ``GET /v1/exports/{id}`` builds it (None without a
    key)."""
    key = request.app[SETTINGS].secret_key
    expires_s = request.app[EDGE].driver.clock.now_ms() // 1000 + int(LINK_TTL.total_seconds())

    def link(index: int) -> str | None:
        if key is None:
            return None
        path = part_path(export_id, index)
        return f"{path}?expires={expires_s}&sig={sign_path(key, path, expires_s)}"

    return link


@routes.get(PREFIX + "/exports")
@guarded
async def exports(request: web.Request) -> web.Response:
    principal, secret = await viewer(request)
    query = request.query
    flt = JobFilter(
        queue=EXPORTS_QUEUE,
        tenant_id=principal.tenant_id,
        limit=PAGE_SIZE,
        after=query.get("after") or None,
        before=query.get("before") or None,
    )
    rows, has_newer, has_older = await one_page(request.app[EDGE].driver, flt)
    newer, older = pager(request, {}, rows, has_newer, has_older)
    return page(
        request,
        "exports.html",
        principal=principal,
        secret=secret,
        exports=[row_view(r) for r in rows],
        newer=newer,
        older=older,
        first=PREFIX + "/exports" if flt.after or flt.before else None,
    )


@routes.get(PREFIX + "/exports/{id}")
@guarded
async def export(request: web.Request) -> web.Response:
    principal, secret = await viewer(request)
    export_id = request.match_info["id"]
    # Another tenant's job answers as an id that does not exist (find_export asks sees first).
    found = await find_export(
        introspection_of(request.app[EDGE].driver),
        request.app[REGISTRY].jobs,
        export_id,
        sees=principal.sees,
    )
    manifest = await read_manifest(found)
    doc = await describe_export(
        found, manifest, expires_in=LINK_TTL, local_link=signed_links(request, found.row.id)
    )
    return page(
        request,
        "export.html",
        principal=principal,
        secret=secret,
        export=doc,
        columns=list(manifest.columns) if manifest is not None else [],
    )


__all__ = ["routes", "signed_links"]
