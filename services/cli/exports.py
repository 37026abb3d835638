"""``ujobs exports list | show | get``: find an export and download it.

``get ID -o FILE`` reads the manifest, then every part in order from the store, into one file
(``-o -`` writes to stdout): the artifact, as ``cat part-*`` would make it. On a terminal a
progress bar counts the bytes; elsewhere one plain line per part goes to stderr. The file is
written beside its final name and renamed into place only when every part arrived, so an
interrupted download never leaves a truncated artifact that looks whole.

Every command taking an id takes any unique start of one (``ujobs.introspect.resolve_job_id``,
as ``ujobs jobs`` does). ``show`` of an export that failed prints its job's last error in full
(the operator's view, the stack included): a dead export will never be ready, and says why.

The export's declaration comes from the app (``--app`` / ``UJOBS_APP``), its store from
``UJOBS_EXPORT_URL`` when it declares no ``sink=``.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, BinaryIO, TypeVar

import typer
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, TransferSpeedColumn
from rich.progress import Progress as Bar

from ujobs.drivers.base import DEFAULT_JOB_PAGE, JobFilter
from ujobs.errors import JobNotFoundError
from ujobs.execution.settle import error_summary
from ujobs.exports.downloads import (
    LINK_TTL,
    FoundExport,
    describe_export,
    find_export,
    read_manifest,
)
from ujobs.exports.family import EXPORTS_QUEUE
from ujobs.exports.manifest import Manifest
from ujobs.exports.sinks import ExportNotFoundError
from ujobs.introspect import list_jobs, resolve_job_id
from ujobs.services.cli.common import (
    AppOption,
    DatabaseUrlOption,
    DriverOption,
    JsonOption,
    refuse_remote,
)
from ujobs.services.config.settings import OperatorConfig, environment
from ujobs.services.exporter import ExportSettings
from ujobs.services.runtime.app_loader import load_api
from ujobs.services.runtime.backends import Backend, open_backend
from ujobs.services.runtime.output import emit_json, note, print_fields, print_table, reported

exports_app = typer.Typer(help="List, inspect and download exports.", no_args_is_help=True)

T = TypeVar("T")
IdArgument = Annotated[
    str, typer.Argument(help="the export's id (its job's id), or a unique start of it")
]


def _run(
    work: Callable[[Backend], Awaitable[T]],
    *,
    as_json: bool,
    database_url: str | None,
    driver: str | None,
) -> T:
    with reported(as_json=as_json):
        env = environment()
        refuse_remote(env, database_url=database_url, driver=driver)
        config = OperatorConfig.load(env, database_url=database_url, driver=driver)
        ExportSettings.load(env).install()

        async def run() -> T:
            async with open_backend(
                config.common.connections, pool_size=2, generic_plans=False
            ) as backend:
                return await work(backend)

        return asyncio.run(run())
    raise AssertionError("unreachable: reported() exits on every error")


async def _find(backend: Backend, app_spec: str | None, export_id: str) -> FoundExport:
    introspect = backend.driver.introspect
    if introspect is None:
        raise ExportNotFoundError("this driver cannot look jobs up by id")
    spec = app_spec if app_spec is not None else environment().get("UJOBS_APP") or None
    try:
        full_id = await resolve_job_id(backend.driver, export_id)
    except JobNotFoundError:
        raise ExportNotFoundError(
            f"no export's id starts with {export_id!r}; `ujobs exports list` shows them",
            meta={"id": export_id},
        ) from None
    return await find_export(introspect, load_api(spec).jobs, full_id)


@exports_app.command("list")
def exports_list(
    queue: Annotated[str, typer.Option(help="the exports' queue")] = EXPORTS_QUEUE,
    limit: Annotated[int, typer.Option(help="rows per page")] = DEFAULT_JOB_PAGE,
    after: Annotated[str | None, typer.Option(help="the next (older) page's cursor")] = None,
    database_url: DatabaseUrlOption = None,
    driver: DriverOption = None,
    as_json: JsonOption = False,
) -> None:
    """One page of exports (the jobs of the exports queue), newest first."""

    async def work(backend: Backend) -> dict[str, Any]:
        return await list_jobs(backend.driver, JobFilter(queue=queue, limit=limit, after=after))

    page = _run(work, as_json=as_json, database_url=database_url, driver=driver)
    if as_json:
        emit_json(page)
        return
    print_table(
        ("ID", "NAME", "STATE", "TENANT", "PROGRESS"),
        [
            (j["id"], j["name"], j["state"], j["tenantId"], _progress(j["progress"]))
            for j in page["jobs"]
        ],
    )
    if not page["jobs"]:
        note("no exports")
    elif page["next"] is not None:
        note(f"more: ujobs exports list --after {page['next']}")


def _progress(progress: Any) -> str | None:
    if not isinstance(progress, dict):
        return None
    return progress.get("note")


@exports_app.command("show")
def exports_show(
    export_id: IdArgument,
    app_spec: AppOption = None,
    database_url: DatabaseUrlOption = None,
    driver: DriverOption = None,
    as_json: JsonOption = False,
) -> None:
    """One export: its job's state, its manifest, and a link per part where the store signs."""

    async def work(backend: Backend) -> dict[str, Any]:
        found = await _find(backend, app_spec, export_id)
        return await describe_export(found, await read_manifest(found), expires_in=LINK_TTL)

    doc = _run(work, as_json=as_json, database_url=database_url, driver=driver)
    if as_json:
        emit_json(doc)
        return
    manifest = doc["manifest"]
    print_fields(
        [
            ("id", doc["id"]),
            ("name", doc["name"]),
            ("state", doc["state"]),
            ("tenant", doc["tenant"]),
            ("prefix", doc["prefix"]),
            ("ready", _readiness(doc)),
            ("format", manifest and manifest["format"]),
            ("parts", manifest and manifest["parts"]),
            ("rows", manifest and manifest["rows"]),
            ("bytes", manifest and manifest["bytes"]),
        ]
    )
    for part in doc["parts"]:
        typer.echo(f"  {part['key']}" + (f"  {part['url']}" if part["url"] else ""))
    if doc["lastError"]:
        typer.echo("last error")
        for line in str(doc["lastError"]).splitlines():
            typer.echo(f"  {line}")


def _readiness(doc: dict[str, Any]) -> str:
    if doc["ready"]:
        return "yes"
    if doc["state"] == "dead":
        return "no: the export is dead and will not finish (its last error is below)"
    if doc["state"] == "cancelled":
        return "no: the export was cancelled"
    return f"no: its job is {doc['state']}; the manifest is written last"


@exports_app.command("get")
def exports_get(
    export_id: IdArgument,
    output: Annotated[str, typer.Option("-o", "--output", help="the file to write (- for stdout)")],
    app_spec: AppOption = None,
    database_url: DatabaseUrlOption = None,
    driver: DriverOption = None,
    as_json: JsonOption = False,
) -> None:
    """Download an export: every part, in order, into one file."""

    async def work(backend: Backend) -> dict[str, Any]:
        found = await _find(backend, app_spec, export_id)
        manifest = await read_manifest(found)
        if manifest is None and found.row.state == "dead":
            why = (error_summary(found.row.last_error) or "no error recorded").splitlines()[0]
            raise ExportNotFoundError(
                f"export {found.row.id} is dead and will never finish ({why}); "
                f"`ujobs exports show {found.row.id}` prints its last error",
                meta={"id": found.row.id, "state": found.row.state},
            )
        if manifest is None:
            raise ExportNotFoundError(
                f"export {found.row.id} has not finished (its job is {found.row.state}); its "
                "manifest is written last — try again once it completes",
                meta={"id": found.row.id, "state": found.row.state},
            )
        written = await _download(found, manifest, output)
        return {"id": found.row.id, "output": output, "parts": manifest.parts, "bytes": written}

    done = _run(work, as_json=as_json, database_url=database_url, driver=driver)
    if as_json:
        emit_json(done)
    elif output != "-":
        note(f"wrote {done['bytes']} bytes ({done['parts']} parts) to {output}")


async def _download(found: FoundExport, manifest: Manifest, output: str) -> int:
    if output == "-":
        return await _copy(found, manifest, sys.stdout.buffer, _Report(manifest, quiet=True))
    target = Path(output)
    partial = target.with_name(f".{target.name}.part")
    try:
        with partial.open("wb") as sink:
            with _Report(manifest, quiet=False) as report:
                written = await _copy(found, manifest, sink, report)
            sink.flush()
            os.fsync(sink.fileno())
        partial.replace(target)
    finally:
        partial.unlink(missing_ok=True)
    return written


async def _copy(found: FoundExport, manifest: Manifest, out: BinaryIO, report: _Report) -> int:
    written = 0
    for index, key in enumerate(manifest.part_keys()):
        async for chunk in found.sink.read(key):
            out.write(chunk)
            written += len(chunk)
            report.advance(len(chunk))
        report.part_done(index)
    out.flush()
    return written


class _Report:
    """A rich progress bar over the bytes on a terminal; a plain line per part otherwise."""

    def __init__(self, manifest: Manifest, *, quiet: bool) -> None:
        self._manifest = manifest
        self._console = Console(stderr=True)
        self._quiet = quiet
        self._bar: Bar | None = None
        self._task: Any = None

    def __enter__(self) -> _Report:
        if not self._quiet and self._console.is_terminal:
            self._bar = Bar(
                "[progress.description]{task.description}",
                BarColumn(),
                DownloadColumn(),
                TransferSpeedColumn(),
                console=self._console,
                transient=True,
            )
            self._bar.start()
            self._task = self._bar.add_task("downloading", total=self._manifest.bytes)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()

    def advance(self, n: int) -> None:
        if self._bar is not None:
            self._bar.update(self._task, advance=n)

    def part_done(self, index: int) -> None:
        if self._bar is None and not self._quiet:
            sys.stderr.write(f"ujobs: part {index + 1} of {self._manifest.parts} downloaded\n")
            sys.stderr.flush()
