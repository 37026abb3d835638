"""A batch enqueue as COPY's text format (sql/queries/enqueue_many_copy.sql).

COPY inserts a batch for less than ``INSERT ... ON CONFLICT`` from ``jsonb_to_recordset``
(no speculative insertion, no JSON decode of the whole batch, heap pages filled a WAL record
at a time), and its text format needs no codec: it works on any asyncpg pool, whatever type
codecs its connections registered. The rows are resolved here exactly as enqueue_many.sql
resolves them (state ``delayed`` when due after ``now``, ``run_at`` defaulting to ``now``,
``created_at = updated_at = now``), so either path stores the same row.

The text is written a chunk of rows at a time while earlier chunks are already on their way,
so the server inserts rows while the client still encodes the rest. A row this module cannot
write (an input orjson refuses, a time outside what a datetime holds) ends the stream with a
line the server refuses, so the COPY inserts nothing, and the batch goes to the statement,
which inserts it or raises the error every other path raises.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime, timedelta

import orjson

from ujobs.drivers.postgres.enqueue_rows import NewRow

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
ESCAPES = str.maketrans({"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"})
NULL = "\\N"
_SHAPE = re.compile(r"^copy\s+(\w+)\s*\(([\w\s,]+)\)\s+from\s+stdin\s*$", re.IGNORECASE)
COLUMNS = (
    "id",
    "run_id",
    "name",
    "queue",
    "state",
    "input",
    "tenant_id",
    "idempotency_key",
    "max_attempts",
    "run_at",
    "created_at",
    "updated_at",
    "traceparent",
    "enqueued_by",
    "slot_key",
    "priority",
)
"""The order ``copy_rows`` writes a row's fields in; ``copy_target`` checks the file agrees."""


def copy_target(sql: str) -> str:
    """The table of the ``copy <table> (<columns>) from stdin`` statement in ``sql`` (comments
    skipped), refused at import when its columns are not ``COLUMNS`` in that order."""
    body = " ".join(
        line.split("--", 1)[0] for line in sql.splitlines() if line.split("--", 1)[0].strip()
    )
    shape = _SHAPE.match(body.strip())
    columns = tuple(c.strip() for c in shape.group(2).split(",")) if shape else ()
    if shape is None or columns != COLUMNS:
        raise ValueError(f"expected copy <table> ({', '.join(COLUMNS)}) from stdin, got {body!r}")
    return shape.group(1)


PRIORITIES = tuple(f"{p}\n" for p in range(10))
"""A priority's COPY text and the line's end, by priority (checked 0..9 before a row is
resolved): the last field, so the line is one join."""

_PG_EPOCH_S = 946_684_800  # 2000-01-01, where Postgres counts its microseconds from


def timestamp(ms: int) -> str:
    """Epoch ms as a timestamptz literal: the instant ``x_ts(ms)`` makes. x_ts goes through a
    float8 (``to_timestamp(ms / 1000.0)``), exact to the microsecond for any time before
    about 2250; past that it can land a microsecond off, and this refuses (OverflowError) so
    the statement stores the row as x_ts rounds it."""
    if round((ms / 1000 - _PG_EPOCH_S) * 1_000_000) != (ms - _PG_EPOCH_S * 1000) * 1000:
        raise OverflowError(f"{ms} ms is not exact through a float8")
    return (_EPOCH + timedelta(milliseconds=ms)).isoformat()


ABORT_LINE = b"\\N\n"
"""A line of one field where COPY expects fifteen: the server refuses it (22P04, missing data
for column) and so aborts the COPY, inserting none of the rows already sent. The stream ends
with it when a later row cannot be written, rather than raising inside asyncpg's reader: an
exception there makes asyncpg send a cancel request on a second connection, which may land on
whatever the connection runs next."""


def copy_chunks(chunks: Iterable[list[NewRow] | None], now: int) -> Iterator[bytes]:
    """Each list of rows (``BatchRows.resolve``'s) of ``chunks`` as one piece of COPY text, as
    the rows come: a batch is written while the server inserts what came before. A None chunk
    (a request was refused: nothing may be inserted) or a row that cannot be written (a field
    that is not text, an input orjson refuses, a time past what a datetime holds) ends the
    stream with ``ABORT_LINE``, so the COPY inserts nothing; the statement path then answers
    the batch (it inserts the rows or raises its own error)."""
    try:
        now_text = timestamp(now)
    except OverflowError:
        yield ABORT_LINE
        return
    for rows in chunks:
        if rows is None:
            yield ABORT_LINE
            return
        try:
            text = "".join([_line(row, now, now_text) for row in rows])
        # A field that is not text (orjson's refusal is a TypeError too), or a time past datetime.
        except (TypeError, AttributeError, OverflowError):
            yield ABORT_LINE
            return
        if text:
            yield text.encode()


def _line(row: NewRow, now: int, now_text: str) -> str:
    """One row (a request and the ids it is inserted under) as a line of COPY text, its
    newline included: the request's own fields, read once, no intermediate dict."""
    request, job_id, run_id = row
    at = request.run_at_ms
    delayed = at is not None and at > now
    run_at = now_text if at is None or at == now else timestamp(at)
    text: tuple[str, ...] = (
        job_id,
        run_id,
        request.name,
        request.queue,
        orjson.dumps(request.input).decode(),
        request.idempotency_key,
    )
    tenant, trace, actor = request.tenant_id, request.traceparent, request.enqueued_by
    slot = request.slot_key
    probe = "".join(text)
    if "\\" in probe or "\t" in probe or "\n" in probe or "\r" in probe:
        text = tuple(t.translate(ESCAPES) for t in text)
    return "\t".join(
        (
            text[0],
            text[1],
            text[2],
            text[3],
            "delayed" if delayed else "ready",
            text[4],
            NULL if tenant is None else tenant.translate(ESCAPES),
            text[5],
            str(request.max_attempts),
            run_at,
            now_text,
            now_text,
            NULL if trace is None else trace.translate(ESCAPES),
            NULL if actor is None else actor.translate(ESCAPES),
            NULL if slot is None else slot.translate(ESCAPES),
            PRIORITIES[request.priority],
        )
    )
