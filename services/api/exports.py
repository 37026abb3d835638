"""The api's export routes: an export's manifest with a link per part, and the parts the
filesystem holds, behind expiring signed links.

| Route | Scope | Answers |
|---|---|---|
| ``GET /v1/exports/{id}`` | ``read`` | the export (its job's state and last error, its manifest once written) and each part's link |
| ``GET /v1/exports/{id}/parts/{index}?expires=&sig=`` | none: the signed link is the credential | one part's bytes, streamed, while the link is valid |

A part on an object store (S3, GCS, Azure) links to a presigned URL: the download never passes
through the api. A part on the filesystem links back here: ``sig`` is HMAC-SHA256, keyed by
``UJOBS_SECRET_KEY``, over the path and the expiry, so the link is the credential — it opens
that one part until ``expires`` (epoch seconds) and nothing else. Without a key, such parts get
no link (``ujobs exports get`` still reads them from the store). The link's host is
``UJOBS_PUBLIC_URL`` (``ujobs.services.api.public_url``), never the request's ``Host``; an api without it
(outside ``ujobs dev``) answers such a part ``"url": null`` with the ``X_CONFIG_INVALID`` saying
so as its ``"error"``.

Tenancy: the api serves the read with ``token_reader`` in the ``AUTHORIZE`` seam. It checks the
bearer token BEFORE any job is read — a missing or bad token is 401, one without the ``read``
scope 403 — and answers the caller as a ``Reader``. A tenant token sees only its own tenant's
exports: another tenant's id answers exactly as an id that does not exist (``find_export``:
the same 404, code, message and meta, nothing of the job named). ``lastError`` is projected as
a job's is: a tenant token reads the code and message without the stack; an operator token
reads the whole. An app mounting these routes behind its own authentication passes
``authorize=operator_only`` (the default of ``add_export_routes``).
"""  # noqa: E501

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

from aiohttp import web

from ujobs.drivers.base import ALL_STATES, JobDriver
from ujobs.errors import UltimateError
from ujobs.exports.downloads import (
    LINK_TTL,
    FoundExport,
    describe_export,
    find_export,
    read_manifest,
)
from ujobs.exports.manifest import Manifest
from ujobs.exports.sinks import ExportNotFoundError
from ujobs.jobs.registry import Registry
from ujobs.services.api.common import BACKEND, REGISTRY, caller, status_for
from ujobs.services.api.public_url import public_base
from ujobs.services.exporter import ExportSettings

__all__ = [
    "AUTHORIZE",
    "EXPORT_SCHEMAS",
    "LINK_TTL",
    "OPERATOR",
    "SETTINGS",
    "Reader",
    "add_export_routes",
    "export_paths",
    "part_path",
    "sign_path",
    "verify_path",
]


class Reader(Protocol):
    """Who reads an export: which tenants' exports exist for them, and whether they read an
    error's stack (an operator) or only its code and message (a tenant). A token's
    ``Principal`` is one."""

    @property
    def operator(self) -> bool: ...

    def sees(self, tenant_id: str | None) -> bool: ...


Authorize = Callable[[web.Request], Awaitable[Reader]]


class _Operator:
    operator = True

    def sees(self, tenant_id: str | None) -> bool:
        return True


OPERATOR: Reader = _Operator()


async def operator_only(request: web.Request) -> Reader:
    """No check: for an app that serves these routes behind its own authentication."""
    return OPERATOR


async def token_reader(request: web.Request) -> Reader:
    """The api's rule, the HTTP edge's: a bearer token with the ``read`` scope (401/403),
    checked before any lookup (so an id's existence is never told to a caller without one);
    another tenant's export does not exist for a tenant token (the 404 of an unknown id)."""

    return await caller(request, "read")


SETTINGS = web.AppKey("export_settings", ExportSettings)
AUTHORIZE: web.AppKey[Authorize] = web.AppKey("export_authorize")


class ExportLinkInvalidError(UltimateError):
    """A download link that is forged, altered or expired."""

    code = "X_EXPORT_LINK_INVALID"


routes = web.RouteTableDef()


def part_path(export_id: str, index: int) -> str:
    return f"/v1/exports/{export_id}/parts/{index}"


def sign_path(key: bytes, path: str, expires_s: int) -> str:
    """The link's signature: HMAC-SHA256 over the path and the expiry."""
    message = f"{path}\n{expires_s}".encode()
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def verify_path(keys: Sequence[bytes], path: str, expires: str, sig: str, now_s: int) -> int:
    """The expiry of a link signed under any of ``keys`` (the first signs new links; the rest
    are ``UJOBS_SECRET_KEY``'s older keys during a rotation); ``X_EXPORT_LINK_INVALID``
    otherwise."""
    valid = expires.isascii() and expires.isdigit()
    # Compared as bytes: compare_digest refuses a str with non-ASCII characters (a TypeError).
    if not valid or not any(
        hmac.compare_digest(sign_path(key, path, int(expires)).encode(), sig.encode())
        for key in keys
    ):
        raise ExportLinkInvalidError(
            "this download link is not valid; ask for a fresh one (GET /v1/exports/{id})"
        )
    if int(expires) < now_s:
        raise ExportLinkInvalidError(
            "this download link has expired; ask for a fresh one (GET /v1/exports/{id})",
            meta={"expires": int(expires)},
        )
    return int(expires)


def _driver(request: web.Request) -> JobDriver:
    return request.app[BACKEND].driver


def _registry(request: web.Request) -> Registry:
    return request.app[REGISTRY]


async def _found(request: web.Request) -> tuple[FoundExport, Reader]:
    reader = await request.app[AUTHORIZE](request)
    driver = _driver(request)
    if driver.introspect is None:
        raise ExportNotFoundError("this driver cannot look jobs up by id")
    found = await find_export(
        driver.introspect, _registry(request).jobs, request.match_info["id"], sees=reader.sees
    )
    return found, reader


_STATUS = {
    "X_EXPORT_NOT_FOUND": 404,
    "X_EXPORT_LINK_INVALID": 403,
    "X_UNAUTHORIZED": 401,
    "X_FORBIDDEN": 403,
}


def _status(error: UltimateError) -> int:
    if error.code in _STATUS:
        return _STATUS[error.code]
    return status_for(error.code)


def _error(error: UltimateError) -> web.Response:
    return web.json_response({"error": error.to_dict()}, status=_status(error))


@routes.get("/v1/exports/{id}")
async def get_export(request: web.Request) -> web.Response:
    try:
        found, reader = await _found(request)
    except UltimateError as exc:
        return _error(exc)
    manifest = await read_manifest(found)
    key = request.app[SETTINGS].secret_key
    now_s = _driver(request).clock.now_ms() // 1000
    expires_s = now_s + int(LINK_TTL.total_seconds())
    try:
        base: str | None = public_base(request)  # UJOBS_PUBLIC_URL, never the Host header
        unlinked: UltimateError | None = None
    except UltimateError as exc:
        base, unlinked = None, exc

    def local_link(index: int) -> str | None:
        if key is None or base is None:
            return None
        path = part_path(found.row.id, index)
        query = f"expires={expires_s}&sig={sign_path(key, path, expires_s)}"
        return f"{base}{path}?{query}"

    body = await describe_export(
        found,
        manifest,
        expires_in=LINK_TTL,
        local_link=local_link,
        error_detail=reader.operator,
    )
    if key is not None and unlinked is not None:
        for part in body["parts"]:
            if part["url"] is None:
                part["error"] = unlinked.to_dict()
    return web.json_response(body)


@routes.get("/v1/exports/{id}/parts/{index}")
async def get_part(request: web.Request) -> web.StreamResponse:
    signing_keys = request.app[SETTINGS].secret_keys
    try:
        if not signing_keys:
            raise ExportLinkInvalidError(
                "this api signs no download links (UJOBS_SECRET_KEY is unset)"
            )
        verify_path(
            signing_keys,
            request.path,
            request.query.get("expires", ""),
            request.query.get("sig", ""),
            _driver(request).clock.now_ms() // 1000,
        )
        driver = _driver(request)
        if driver.introspect is None:
            raise ExportNotFoundError("this driver cannot look jobs up by id")
        found = await find_export(
            driver.introspect, _registry(request).jobs, request.match_info["id"]
        )
        manifest = await read_manifest(found)
        index = _index(request.match_info["index"], manifest)
    except UltimateError as exc:
        return _error(exc)
    assert manifest is not None
    keys = manifest.part_keys()
    response = web.StreamResponse(
        headers={
            "Content-Type": manifest.content_type,
            "Content-Disposition": (
                f'attachment; filename="{found.row.id}-part-{index:05d}.{manifest.extension}"'
            ),
        }
    )
    await response.prepare(request)
    async for chunk in found.sink.read(keys[index]):
        await response.write(chunk)
    await response.write_eof()
    return response


def _index(raw: str, manifest: Manifest | None) -> int:
    if manifest is None:
        raise ExportNotFoundError("this export has not finished; its parts are not served yet")
    if not raw.isdigit() or int(raw) >= manifest.parts:
        raise ExportNotFoundError(
            f"no part {raw!r}; this export has {manifest.parts}", meta={"parts": manifest.parts}
        )
    return int(raw)


_NULLABLE_STRING = {"type": ["string", "null"]}
EXPORT_SCHEMAS: dict[str, Any] = {
    "Export": {
        "type": "object",
        "required": [
            "id",
            "name",
            "state",
            "tenant",
            "prefix",
            "ready",
            "manifest",
            "parts",
            "linksExpireInS",
            "lastError",
        ],
        "properties": {
            "id": {"type": "string"},
            "name": {"type": "string"},
            "state": {"type": "string", "enum": list(ALL_STATES)},
            "tenant": _NULLABLE_STRING,
            "prefix": {"type": "string"},
            "ready": {"type": "boolean"},
            "manifest": {"type": ["object", "null"]},
            "parts": {"type": "array", "items": {"$ref": "#/components/schemas/ExportPart"}},
            "linksExpireInS": {"type": "integer"},
            "lastError": {
                "description": "the job's last error, kept after a retry that succeeded (a "
                "dead export's says why it will never be ready); null until an attempt fails. "
                "A tenant token reads its code and message, an operator token the stack too",
                "type": ["string", "null"],
            },
        },
    },
    "ExportPart": {
        "type": "object",
        "required": ["index", "key", "url"],
        "properties": {
            "index": {"type": "integer"},
            "key": {"type": "string"},
            "url": {
                "description": "a presigned or signed link that expires; null when the api "
                "cannot sign one (error says why)",
                "type": ["string", "null"],
            },
            "error": {
                "description": "why url is null (X_CONFIG_INVALID naming UJOBS_PUBLIC_URL)",
                "type": "object",
                "required": ["code", "message", "meta"],
                "properties": {
                    "code": {"type": "string", "pattern": "^X_[A-Z0-9_]+$"},
                    "message": {"type": "string"},
                    "meta": {"type": "object"},
                },
            },
        },
    },
}
"""The export read's component schemas (``ujobs.services.api.openapi`` adds them)."""


def export_paths(
    json_body: Callable[[str, dict[str, Any]], dict[str, Any]],
    error: Callable[[str], dict[str, Any]],
) -> dict[str, Any]:
    """These routes' entries of the api's OpenAPI document."""
    export_id = {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}
    return {
        "/v1/exports/{id}": {
            "get": {
                "summary": "An export: its job's state, its manifest, a link per part",
                "parameters": [export_id],
                "responses": {
                    "200": json_body(
                        "the export; ready is false until the manifest is written, and a "
                        "dead export's lastError says why it never will be",
                        {"$ref": "#/components/schemas/Export"},
                    ),
                    "401": error("no, unknown, revoked or expired token (X_UNAUTHORIZED)"),
                    "404": error("no such export (X_EXPORT_NOT_FOUND)"),
                    "429": error("the token's rate is spent (X_RATE_LIMITED)"),
                    "503": error("the database is away or the api drains"),
                },
            }
        },
        "/v1/exports/{id}/parts/{index}": {
            "get": {
                "summary": "One part's bytes, through a signed expiring link",
                "parameters": [
                    export_id,
                    {
                        "name": "index",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "integer"},
                    },
                    {
                        "name": "expires",
                        "in": "query",
                        "required": True,
                        "schema": {"type": "integer"},
                    },
                    {"name": "sig", "in": "query", "required": True, "schema": {"type": "string"}},
                ],
                "responses": {
                    "200": {"description": "the part (text/csv or application/x-ndjson)"},
                    "403": error("a forged, altered or expired link (X_EXPORT_LINK_INVALID)"),
                    "404": error("no such export or part, or not finished (X_EXPORT_NOT_FOUND)"),
                },
            }
        },
    }


def add_export_routes(
    app: web.Application,
    settings: ExportSettings | None = None,
    *,
    authorize: Authorize = operator_only,
) -> None:
    """Serve the export routes on ``app`` (the api's); ``settings`` default to the
    environment's, whose ``UJOBS_EXPORT_URL`` becomes this process's default sink."""
    if settings is None:
        from ujobs.services.config.settings import environment

        settings = ExportSettings.load(environment())
    settings.install()
    app[SETTINGS] = settings
    app[AUTHORIZE] = authorize
    app.add_routes(routes)
