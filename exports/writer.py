"""One page in, one part out: the work of one export step.

``write_page`` reads a page from the source after the stored cursor, passes each row through
``row()`` (refusing a key ``columns`` does not carry), encodes them in small runs and streams
the bytes to the sink as ``part-NNNNN``. It answers the step's whole record: the cursor after
the page and two counters (rows and bytes so far) — never the rows — plus whether another page
may follow. Part 0 starts with the header; no other part has one, and every line ends in a
newline, so ``cat part-*`` is one file.

A part past ``max_part_bytes`` is ``X_EXPORT_PART_TOO_LARGE`` naming the ``batch`` to lower:
the rows of a page are what the exporter holds while it encodes them, so the bound on a part
is the bound on that memory. On the COPY road with no declared ``batch`` the page size is the
default's, not the user's, so a page past the bound is read again smaller instead.

A CSV export without ``row()`` over a ``keyset()`` of the export's columns takes the other road
by default: Postgres writes the page as CSV, neutralised by the SELECT, and that is the part,
byte for byte what the encoder would write from the decoded rows.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ujobs.errors import ExportPartTooLargeError, ExportRowInvalidError
from ujobs.exports.encoders import Encoder
from ujobs.exports.manifest import part_key
from ujobs.exports.sinks import ExportSink
from ujobs.exports.sources import ExportSource

__all__ = ["ENCODE_ROWS", "PageState", "PartSpec", "copies_csv", "write_page"]

# Rows encoded together: big enough that the encoder's per-call cost vanishes, small enough
# that a run's text is a few hundred kilobytes.
ENCODE_ROWS = 2_000


@dataclass(frozen=True, slots=True)
class PartSpec:
    """What every page of one export shares."""

    job: str
    prefix: str
    columns: tuple[str, ...]
    encoder: Encoder
    row: Callable[[Any], Any] | None
    batch: int
    max_part_bytes: int
    declared: bool = True
    """Whether ``batch`` was declared (else a default the COPY road may lower to fit a part)."""


@dataclass(frozen=True, slots=True)
class PageState:
    """A step's record: where the next page starts, and what was written so far."""

    cursor: Any
    rows: int
    bytes: int
    parts: int
    more: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "cursor": self.cursor,
            "rows": self.rows,
            "bytes": self.bytes,
            "parts": self.parts,
            "more": self.more,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PageState:
        return cls(
            cursor=data["cursor"],
            rows=int(data["rows"]),
            bytes=int(data["bytes"]),
            parts=int(data["parts"]),
            more=bool(data["more"]),
        )


START = PageState(cursor=None, rows=0, bytes=0, parts=0, more=True)


async def write_page(
    spec: PartSpec, source: ExportSource[Any], sink: ExportSink, index: int, before: PageState
) -> PageState:
    """Write part ``index`` from the page after ``before.cursor``; answers the next state."""
    if copies_csv(source, spec.row, spec.encoder, spec.columns):
        return await _write_copied_page(spec, source, sink, index, before)
    chunks = aiter(_chunks(source, before.cursor, spec.batch))
    try:
        first = await _next_chunk(chunks)
        if first is None and index > 0:
            # The previous page was exactly full and nothing follows: no empty part.
            return PageState(before.cursor, before.rows, before.bytes, before.parts, more=False)
        tally = _Tally()
        encoded = _encode(spec, source, first, chunks, index, tally)
        written = await sink.write(
            part_key(spec.prefix, index, spec.encoder.extension),
            encoded,
            content_type=spec.encoder.content_type,
        )
    finally:
        closer = getattr(chunks, "aclose", None)
        if closer is not None:
            await closer()
    return PageState(
        cursor=tally.cursor if tally.rows else before.cursor,
        rows=before.rows + tally.rows,
        bytes=before.bytes + written,
        parts=index + 1,
        more=tally.rows == spec.batch,
    )


def copies_csv(
    source: ExportSource[Any],
    row: Callable[[Any], Any] | None,
    encoder: Encoder,
    columns: Sequence[str],
) -> bool:
    """Whether Postgres writes the pages as CSV: a CSV export without ``row()`` over a
    ``keyset()`` that may copy (``copy=None``: when its columns are the export's, in order;
    ``copy=True``: always, and a mismatch is refused by the page)."""
    wanted = getattr(source, "copy", False)
    if wanted is False or row is not None or encoder.extension != "csv":
        return False
    return wanted is True or tuple(getattr(source, "columns", None) or ()) == tuple(columns)


async def _write_copied_page(
    spec: PartSpec, source: Any, sink: ExportSink, index: int, before: PageState
) -> PageState:
    """A page Postgres wrote as CSV, neutralised by its SELECT, as the part."""
    if tuple(source.columns) != spec.columns:
        raise ExportRowInvalidError(
            f"export {spec.job!r}: keyset(copy=True) writes its columns as they are, so they "
            f"must be the export's columns in order: {list(spec.columns)!r}",
            meta={"job": spec.job, "columns": list(spec.columns)},
        )
    fit = None if spec.declared else spec.max_part_bytes
    page = await source.csv_page(before.cursor, spec.batch, fit=fit)
    if page.rows == 0 and index > 0:
        return PageState(before.cursor, before.rows, before.bytes, before.parts, more=False)
    data = page.data
    if len(data) > spec.max_part_bytes:
        raise _too_large(spec, index, page.rows)
    header = spec.encoder.header() if index == 0 else b""

    async def body() -> AsyncIterator[bytes]:
        if header:
            yield header
        yield data

    key = part_key(spec.prefix, index, spec.encoder.extension)
    written = await sink.write(key, body(), content_type=spec.encoder.content_type)
    return PageState(
        cursor=page.cursor if page.rows else before.cursor,
        rows=before.rows + page.rows,
        bytes=before.bytes + written,
        parts=index + 1,
        more=page.rows == page.limit,
    )


def _chunks(source: ExportSource[Any], after: Any, limit: int) -> AsyncIterator[Sequence[Any]]:
    """The page as runs of rows: the source's own (``chunks()``, one per fetch) when it has
    them, else its rows grouped here — a row at a time through an async generator costs more
    than encoding it."""
    bulk = getattr(source, "chunks", None)
    if bulk is not None:
        chunks: AsyncIterator[Sequence[Any]] = bulk(after, limit)
        return chunks
    return _grouped(source.rows(after, limit))


async def _grouped(rows: AsyncIterator[Any]) -> AsyncIterator[Sequence[Any]]:
    held: list[Any] = []
    try:
        async for row in rows:
            held.append(row)
            if len(held) >= ENCODE_ROWS:
                yield held
                held = []
        if held:
            yield held
    finally:
        closer = getattr(rows, "aclose", None)
        if closer is not None:
            await closer()


async def _next_chunk(chunks: AsyncIterator[Sequence[Any]]) -> Sequence[Any] | None:
    async for chunk in chunks:
        if chunk:
            return chunk
    return None


class _Tally:
    rows = 0
    bytes = 0
    cursor: Any = None


async def _encode(
    spec: PartSpec,
    source: ExportSource[Any],
    first: Sequence[Any] | None,
    rest: AsyncIterator[Sequence[Any]],
    index: int,
    tally: _Tally,
) -> AsyncIterator[bytes]:
    header = spec.encoder.header() if index == 0 else b""
    if header:
        tally.bytes += len(header)
        yield header
    if first is None:
        return
    shape = _RowShape(spec, source)
    chunk: Sequence[Any] | None = first
    taken = 0
    last: Any = None
    while chunk is not None and taken < spec.batch:
        chunk = chunk[: spec.batch - taken]
        taken += len(chunk)
        if chunk:
            last = chunk[-1]
        for at in range(0, len(chunk), ENCODE_ROWS):
            piece = chunk[at : at + ENCODE_ROWS]
            yield _emit(spec, index, tally, shape.checked(piece))
        chunk = await anext(rest, None) if taken < spec.batch else None
    tally.cursor = source.cursor(last)


def _emit(spec: PartSpec, index: int, tally: _Tally, held: Sequence[Any]) -> bytes:
    data = spec.encoder.encode(held)
    tally.rows += len(held)
    tally.bytes += len(data)
    if tally.bytes > spec.max_part_bytes:
        raise _too_large(spec, index, tally.rows)
    return data


def _too_large(spec: PartSpec, index: int, rows: int) -> ExportPartTooLargeError:
    return ExportPartTooLargeError(
        f"export {spec.job!r}: part {index} passed max_part_bytes ({spec.max_part_bytes}) "
        f"after {rows} rows; lower batch (now {spec.batch}) so a page fits",
        meta={
            "job": spec.job,
            "part": index,
            "batch": spec.batch,
            "max_part_bytes": spec.max_part_bytes,
        },
    )


class _RowShape:
    """``row()`` applied and its keys checked against ``columns``."""

    def __init__(self, spec: PartSpec, source: ExportSource[Any]) -> None:
        self._row = spec.row
        self._columns = frozenset(spec.columns)
        self._job = spec.job
        # A source that selects named columns (keyset's) answers rows of that one shape: with
        # no row() in between, checking the shape once here is checking every row.
        shape = getattr(source, "columns", None)
        self._trusted = self._row is None and shape is not None and set(shape) <= self._columns

    def checked(self, rows: Sequence[Any]) -> Sequence[Any]:
        return rows if self._trusted else [self.check(raw) for raw in rows]

    def check(self, raw: Any) -> Any:
        value = raw if self._row is None else self._row(raw)
        if type(value) is dict:
            if value.keys() <= self._columns:
                return value
            extra = value.keys() - self._columns
        else:
            keys = getattr(value, "keys", None)
            if keys is None or not hasattr(value, "get"):
                raise ExportRowInvalidError(
                    f"export {self._job!r}: row() answered a {type(value).__name__}; it must "
                    "answer a mapping of column to value",
                    meta={"job": self._job, "type": type(value).__name__},
                )
            extra = set(keys()) - self._columns
            if not extra:
                return value
        raise ExportRowInvalidError(
            f"export {self._job!r}: row() answered {sorted(extra)!r}, which columns does not "
            "carry; both encoders would drop it in silence — add it to columns or leave it out",
            meta={"job": self._job, "extra": sorted(extra), "columns": sorted(self._columns)},
        )
