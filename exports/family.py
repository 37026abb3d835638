"""``export_rows()``: a job that streams a paged read to object storage, resumably.

It exists because ``rows = await fetch_all(); await put(key, csv(rows))`` works on 200 rows and
OOM-kills the pod on two million. The declaration::

    export_orders = export_rows(
        name="orders.export",
        input=t.object(org_id=t.string, export_id=t.string),
        tenant=lambda i: i.org_id,
        prefix=lambda i: f"exports/{i.org_id}/{i.export_id}",
        source=lambda run: keyset("orders", key="id", columns=["id", "placed_at", "total"],
                                  tenant_column="org_id"),  # DATABASE_URL's; or pool=
        format="csv",
        columns=["id", "placed_at", "total"],
        row=lambda r: {"id": r["id"], "placed_at": r["placed_at"].isoformat(),
                       "total": f"{r['total']:.2f} EUR"},
    )

Each page is one step named ``part-NNNNN``: it writes that part and stores the cursor after it
plus the rows and bytes so far. A retried attempt replays the finished steps from storage (no
read, no write) and resumes at the first unfinished page, which REWRITES its part — the key is
the page index, so a page that runs twice cannot leave a duplicate. ``manifest.json`` is the
last step.

``tenant`` is required and ``tenant="none"`` gets no cross-tenant escape: the source is made
under the job's tenant, and a ``keyset()`` applies it itself — it names its tenant column (only
the run's tenant's rows are read, a bound parameter in every statement) or declares itself
``tenant_free=True``, else it is refused (``X_EXPORT_TENANCY_UNDECLARED``). A tenant-scoped read
in a ``tenant="none"`` export fails (``X_TENANCY_ACTOR_ORG_REQUIRED``) unless its author makes
it inside ``cross_tenant(reason)``. An export writes rows into one downloadable object;
spanning tenants must be written down where it happens. (``iterate()`` reads whatever its
factory yields: its author filters.)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ujobs.durations import Duration
from ujobs.errors import register_error_retry
from ujobs.execution.run import Run
from ujobs.exports.encoders import Encoder, encoder_for
from ujobs.exports.manifest import Manifest, manifest_key, validate_prefix
from ujobs.exports.rate import RowRate, valid_rate
from ujobs.exports.sinks import ExportSink, default_sink
from ujobs.exports.sources import ExportSource
from ujobs.exports.writer import START, PageState, PartSpec, copies_csv, write_page
from ujobs.jobs.declaration_rules import declaration_invalid, validate_name
from ujobs.jobs.job import JobHandle, job
from ujobs.jobs.retry import Retry

__all__ = [
    "COPY_BATCH",
    "DEFAULT_BATCH",
    "DEFAULT_MAX_PART_BYTES",
    "EXPORTS_QUEUE",
    "ExportBody",
    "ExportSpec",
    "export_of",
    "export_rows",
]

EXPORTS_QUEUE = "exports"
DEFAULT_BATCH = 10_000
# The page when Postgres writes the CSV (a keyset() CSV export without row(), the default road):
# a page held as CSV bytes costs a fraction of the same rows decoded, while each page still pays
# its statements, its transaction and its step; bigger pages spread those thinner (README,
# Performance).
COPY_BATCH = 50_000
DEFAULT_MAX_PART_BYTES = 64 * 1024 * 1024

# A refused row, an oversized page or a source that does not declare its tenancy fails the
# same way on every attempt: dead-letter at once.
register_error_retry(
    {
        "X_EXPORT_ROW_INVALID": "terminal",
        "X_EXPORT_PART_TOO_LARGE": "terminal",
        "X_EXPORT_TENANCY_UNDECLARED": "terminal",
    }
)


@dataclass(frozen=True, slots=True)
class ExportSpec:
    """An export's declaration, as the pass, the api and the CLI read it."""

    name: str
    prefix: Callable[[Any], str]
    source: Callable[[Run[Any]], ExportSource[Any]]
    format: str
    columns: tuple[str, ...]
    row: Callable[[Any], Any] | None
    sink: Callable[[], ExportSink] | None
    batch: int | None
    max_part_bytes: int
    rate: float | None
    bom: bool

    def encoder(self) -> Encoder:
        return encoder_for(self.format, self.columns, bom=self.bom)

    def open_sink(self) -> ExportSink:
        """The sink, read now (a thunk: after the app configured its storage, never at import)."""
        return self.sink() if self.sink is not None else default_sink()

    def prefix_for(self, value: Any) -> str:
        return validate_prefix(self.prefix(value), job=self.name)

    def part_for(self, prefix: str, encoder: Encoder, source: ExportSource[Any]) -> PartSpec:
        """What every page shares; ``batch`` as declared, else the default of the road the
        pages take (``COPY_BATCH`` when Postgres writes the CSV, ``DEFAULT_BATCH`` else)."""
        if self.batch is not None:
            batch = self.batch
        else:
            copied = copies_csv(source, self.row, encoder, self.columns)
            batch = COPY_BATCH if copied else DEFAULT_BATCH
        return PartSpec(
            job=self.name,
            prefix=prefix,
            columns=self.columns,
            encoder=encoder,
            row=self.row,
            batch=batch,
            max_part_bytes=self.max_part_bytes,
            declared=self.batch is not None,
        )


class ExportBody:
    """The job body of an export; ``export_of(handle)`` finds the spec through it."""

    def __init__(self, spec: ExportSpec) -> None:
        self.spec = spec

    async def __call__(self, run: Run[Any]) -> dict[str, Any]:
        spec = self.spec
        prefix = spec.prefix_for(run.input)
        sink = spec.open_sink()
        encoder = spec.encoder()
        # Both made at the first page that runs: a resumed attempt replays the pages before it
        # from their steps and never reads them.
        source: ExportSource[Any] | None = None
        part: PartSpec | None = None
        pace = RowRate(spec.rate) if spec.rate is not None else None
        state = START
        index = 0
        while state.more:
            before = state

            async def page(_: Any, i: int = index, at: PageState = before) -> dict[str, Any]:
                nonlocal source, part
                if source is None or part is None:
                    source = spec.source(run)
                    part = spec.part_for(prefix, encoder, source)
                written = await write_page(part, source, sink, i, at)
                if pace is not None:
                    await pace.read(written.rows - at.rows)
                return written.to_json()

            state = PageState.from_json(await run.step.run(f"part-{index:05d}", page))
            run.progress(state.parts, state.parts + (1 if state.more else 0), f"{state.rows} rows")
            index += 1
        manifest = Manifest(
            name=spec.name,
            job_id=run.job_id,
            tenant=run.tenant_id,
            prefix=prefix,
            format=spec.format,
            extension=encoder.extension,
            content_type=encoder.content_type,
            columns=spec.columns,
            parts=state.parts,
            rows=state.rows,
            bytes=state.bytes,
            bom=spec.bom,
        )

        async def write_manifest(_: Any) -> dict[str, Any]:
            await sink.write(
                manifest_key(prefix), _once(manifest.encode()), content_type="application/json"
            )
            return manifest.to_json()

        stored: dict[str, Any] = await run.step.run("manifest", write_manifest)
        return stored


async def _once(data: bytes) -> Any:
    yield data


def export_rows(
    *,
    name: str,
    tenant: Callable[[Any], str | None] | str,
    prefix: Callable[[Any], str],
    source: Callable[[Run[Any]], ExportSource[Any]],
    columns: Sequence[str],
    input: Any = None,
    format: str = "csv",
    row: Callable[[Any], Mapping[str, Any]] | None = None,
    sink: Callable[[], ExportSink] | None = None,
    batch: int | None = None,
    max_part_bytes: int = DEFAULT_MAX_PART_BYTES,
    rate: float | None = None,
    bom: bool = False,
    idempotency_key: Callable[[Any], str] | None = None,
    queue: str = EXPORTS_QUEUE,
    retry: Retry | Mapping[str, Any] | None = None,
    timeout: Duration | None = None,
    description: str | None = None,
) -> JobHandle[Any]:
    """Declare an export job (see the module's docstring); answers its ``JobHandle``.

    ``source(run)`` answers an ``ExportSource`` (``keyset(...)``, ``iterate(...)``);
    ``row(r)`` maps a source row to a mapping over ``columns`` (None: rows already are);
    ``sink()`` answers the ``ExportSink`` (None: ``default_sink()``); ``batch`` rows make a
    page and a part (None: ``DEFAULT_BATCH``, or ``COPY_BATCH`` when Postgres writes the CSV);
    ``max_part_bytes`` bounds a part; ``rate`` caps rows a second (no default). The
    idempotency key defaults to the name and the prefix: one artifact, one run.
    """
    job_name = validate_name(name)
    cols = _columns(job_name, columns)
    if format not in ("csv", "jsonl"):
        raise declaration_invalid(job_name, f"format must be 'csv' or 'jsonl', got {format!r}")
    if bom and format != "csv":
        raise declaration_invalid(job_name, "bom=True is a CSV option", field="bom")
    functions: dict[str, Any] = {"prefix": prefix, "source": source, "row": row, "sink": sink}
    for field, fn in functions.items():
        if not callable(fn) and not (fn is None and field in ("row", "sink")):
            raise declaration_invalid(job_name, f"{field} must be a function", field=field)
    sizes: dict[str, Any] = {"batch": batch, "max_part_bytes": max_part_bytes}
    for field, size in sizes.items():
        if size is None and field == "batch":
            continue
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise declaration_invalid(
                job_name, f"{field} must be a positive whole number, got {size!r}", field=field
            )
    if rate is not None and not valid_rate(rate):
        raise declaration_invalid(
            job_name, f"rate must be a positive number of rows a second, got {rate!r}", field="rate"
        )
    spec = ExportSpec(
        name=job_name,
        prefix=prefix,
        source=source,
        format=format,
        columns=cols,
        row=row,
        sink=sink,
        batch=batch,
        max_part_bytes=max_part_bytes,
        rate=None if rate is None else float(rate),
        bom=bom,
    )

    def default_key(value: Any) -> str:
        return f"{job_name}:{spec.prefix_for(value)}"

    return job(
        name=job_name,
        input=input,
        idempotency_key=idempotency_key if idempotency_key is not None else default_key,
        tenant=tenant,  # type: ignore[arg-type]  # a bad string is refused by job() itself
        run=ExportBody(spec),
        queue=queue,
        retry=retry,
        timeout=timeout,
        description=description or f"export {job_name} to {format}",
    )


def _columns(job_name: str, columns: Any) -> tuple[str, ...]:
    if isinstance(columns, str) or not isinstance(columns, Sequence) or not columns:
        raise declaration_invalid(
            job_name, "columns must be a non-empty list of column names", field="columns"
        )
    cols = tuple(columns)
    if not all(isinstance(c, str) and c for c in cols) or len(set(cols)) != len(cols):
        raise declaration_invalid(
            job_name, "columns must be distinct non-empty strings", field="columns"
        )
    return cols


def export_of(handle: JobHandle[Any]) -> ExportSpec | None:
    """The export spec behind ``handle``, or None for a job that is not an export."""
    body = handle.definition.run
    return body.spec if isinstance(body, ExportBody) else None
