"""Finding an export by its job id, reading its manifest, and handing out its parts.

One implementation for both faces: the api's ``GET /v1/exports/{id}`` and ``ujobs exports
show|get`` call these. An export's id is its job's id; the job row names the declaration (the
app must be loaded to know it) and carries the input, from which the declaration rebuilds the
prefix — the same way the run that wrote the parts did.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Protocol

from ujobs.drivers.base import JobRow
from ujobs.execution.settle import error_summary
from ujobs.exports.family import ExportSpec, export_of
from ujobs.exports.manifest import Manifest, manifest_key, part_key
from ujobs.exports.sinks import ExportNotFoundError, ExportSink
from ujobs.jobs.job import JobHandle

LINK_TTL = timedelta(minutes=15)
"""How long a download link handed out for an export's part stays valid (the api, the
dashboard and ``ujobs exports show`` all hand out links this long)."""

__all__ = [
    "LINK_TTL",
    "FoundExport",
    "describe_export",
    "find_export",
    "read_manifest",
    "stream_parts",
]


class Introspect(Protocol):
    async def get(self, job_id: str) -> JobRow | None: ...


@dataclass(frozen=True, slots=True)
class FoundExport:
    row: JobRow
    spec: ExportSpec
    prefix: str
    sink: ExportSink


def _everyone(tenant: str | None) -> bool:
    return True


async def find_export(
    introspect: Introspect,
    jobs: Mapping[str, JobHandle[Any]],
    export_id: str,
    *,
    sees: Callable[[str | None], bool] = _everyone,
) -> FoundExport:
    """The export whose job id is ``export_id``; ``X_EXPORT_NOT_FOUND`` for anything else.

    ``sees(tenant)`` says whether the caller may see a job of that tenant (a token's
    ``Principal.sees``; everyone for an operator). It is asked before anything else is read
    from the row, and a job it may not see answers exactly as an id that does not exist: the
    same code, message and meta — never the job's name, never "not an export"."""
    row = await introspect.get(export_id)
    if row is None or not sees(row.tenant_id):
        raise ExportNotFoundError(f"no export {export_id!r}", meta={"id": export_id})
    handle = jobs.get(row.name)
    spec = export_of(handle) if handle is not None else None
    if handle is None or spec is None:
        raise ExportNotFoundError(
            f"job {export_id!r} ({row.name}) is not an export this app declares; load the app "
            "that declares it (UJOBS_APP / --app)",
            meta={"id": export_id, "name": row.name},
        )
    prefix = spec.prefix_for(handle.parse_input(row.input))
    return FoundExport(row=row, spec=spec, prefix=prefix, sink=spec.open_sink())


async def read_manifest(found: FoundExport) -> Manifest | None:
    """The manifest, or None while the export has not written it (it is written last)."""
    try:
        raw = b"".join([chunk async for chunk in found.sink.read(manifest_key(found.prefix))])
    except ExportNotFoundError:
        return None
    return Manifest.decode(raw)


async def describe_export(
    found: FoundExport,
    manifest: Manifest | None,
    *,
    expires_in: timedelta,
    local_link: Any = None,
    error_detail: bool = True,
) -> dict[str, Any]:
    """The export as JSON: its job, its manifest, a link per part, and its job's last error.

    A part's link is the store's presigned URL, else ``local_link(index)`` (the api's own
    signed link, for the filesystem), else None (a reader with access to the store uses
    ``ujobs exports get``). ``lastError`` is why the last attempt failed (a dead export's is
    why it will never be ready), projected as a job's is: ``error_detail=False`` (a tenant's
    token) keeps the code and message and drops the stack, which names the server's code."""
    parts: list[dict[str, Any]] = []
    if manifest is not None:
        for index in range(manifest.parts):
            key = part_key(manifest.prefix, index, manifest.extension)
            url = await found.sink.link(key, expires_in)
            if url is None and local_link is not None:
                url = local_link(index)
            parts.append({"index": index, "key": key, "url": url})
    return {
        "id": found.row.id,
        "name": found.row.name,
        "state": found.row.state,
        "tenant": found.row.tenant_id,
        "prefix": found.prefix,
        "ready": manifest is not None,
        "manifest": None if manifest is None else manifest.to_json(),
        "parts": parts,
        "linksExpireInS": int(expires_in.total_seconds()),
        "lastError": found.row.last_error if error_detail else error_summary(found.row.last_error),
    }


async def stream_parts(sink: ExportSink, manifest: Manifest) -> AsyncIterator[bytes]:
    """Every part in order: the artifact as one stream (``cat part-*``)."""
    for key in manifest.part_keys():
        async for chunk in sink.read(key):
            yield chunk
