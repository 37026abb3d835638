"""Encoders: rows (mappings keyed by the export's columns) to the bytes of a part.

Two formats, one shape: ``header()`` is what part 0 starts with, ``encode(rows)`` turns a run
of rows into bytes, and every line ends in a newline, so ``cat part-*`` is one valid file.

* **CSV** is RFC 4180 quoting (comma, ``"``-quoting only where a cell needs it, doubled quotes
  inside), LF line ends, UTF-8, with an optional byte-order mark for spreadsheet users. Values
  are written in Postgres' text forms, as ``COPY … (FORMAT csv)`` writes them, so a page
  Postgres wrote and a page encoded here are the same bytes: ``t``/``f``, numerics without an
  exponent, shortest floats, timestamps in UTC as ``2024-01-02 03:04:05.5+00``, a NULL as an
  empty cell and an empty string as ``""``. It is safe to open: a string cell that a
  spreadsheet would EVALUATE — one leading with ``=``, ``+``, ``-``, ``@``, TAB, CR or LF, also
  after leading spaces or quotes — gets a ``'`` in front (OWASP's CSV-injection rule). Numbers
  are never touched, and a string that is a plain negative number (``-12.50``) stays one: a
  spreadsheet reads it as the number it is.
* **JSONL** is one ``orjson`` object a line, keys in the columns' order.

A value a format cannot carry (a dict in a CSV cell, bytes, an object orjson does not know) is
``X_EXPORT_ROW_INVALID`` naming the column, never a ``repr`` in somebody's download.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, date, datetime, time
from decimal import Decimal
from itertools import repeat
from operator import itemgetter
from typing import Any, Literal, Protocol
from uuid import UUID

import orjson

from ujobs.errors import ExportRowInvalidError, InvariantError
from ujobs.exports.csv_lines import csv_lines, quoted

__all__ = [
    "BOM",
    "CsvEncoder",
    "Encoder",
    "ExportFormat",
    "JsonlEncoder",
    "csv_cell",
    "encoder_for",
    "float_text",
    "neutralise",
    "numeric_text",
    "time_text",
    "timestamp_text",
]

ExportFormat = Literal["csv", "jsonl"]
BOM = "\ufeff"

# What a spreadsheet treats as the start of a formula (or, for TAB/CR/LF, as a way to smuggle
# one past a naive check), and what may stand in front of it and still be skipped by the parser.
_FORMULA_LEAD = frozenset("=+-@\t\r\n")
_SKIPPABLE_LEAD = " \"'"
_NEEDS_A_LOOK = _FORMULA_LEAD | frozenset(_SKIPPABLE_LEAD)
_PLAIN_NEGATIVE = re.compile(r"-(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def neutralise(text: str) -> str:
    """``text`` as a cell no spreadsheet evaluates: ``'`` in front of a formula lead."""
    if not text or text[0] not in _NEEDS_A_LOOK:
        return text
    if text[0] == "-" and _PLAIN_NEGATIVE.fullmatch(text):
        return text
    stripped = text.lstrip(_SKIPPABLE_LEAD)
    if text[0] in _FORMULA_LEAD or (stripped and stripped[0] in _FORMULA_LEAD):
        return "'" + text
    return text


def csv_cell(value: Any, column: str) -> str | None:
    """One value as the text of a CSV cell (before quoting), in Postgres' text form; None for
    a NULL."""
    if isinstance(value, str):
        return neutralise(value)
    if value is None:
        return None
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return float_text(value)
    if isinstance(value, Decimal):
        return numeric_text(value)
    if isinstance(value, datetime):
        return timestamp_text(value)
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, time):
        return time_text(value)
    if isinstance(value, UUID):
        return str(value)
    raise _invalid(
        column,
        value,
        "a CSV cell is a string, number, bool, date/time, UUID or None; "
        "format it in row() (json.dumps for a nested value)",
    )


def float_text(value: float) -> str:
    """A float as Postgres writes a ``float8``: the shortest exact digits, positional from
    1e-4 up to 1e15, with an exponent of at least two digits beyond. (Past 2**53 Postgres
    sometimes writes a 17th digit Python's shortest form does without; both read back as the
    same float.)"""
    if not math.isfinite(value):
        return "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    sign, digits, exponent = Decimal(repr(value)).as_tuple()
    text = "".join(map(str, digits)).rstrip("0") or "0"
    assert isinstance(exponent, int)  # finite: an int
    magnitude = len(digits) - 1 + exponent  # the power of ten of the first digit
    minus = "-" if sign else ""
    if -4 <= magnitude < 15:
        if magnitude < 0:
            return minus + "0." + "0" * (-magnitude - 1) + text
        whole = text[: magnitude + 1].ljust(magnitude + 1, "0")
        fraction = text[magnitude + 1 :]
        return minus + whole + ("." + fraction if fraction else "")
    mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
    return f"{minus}{mantissa}e{'-' if magnitude < 0 else '+'}{abs(magnitude):02d}"


def numeric_text(value: Decimal) -> str:
    """A Decimal as Postgres writes a ``numeric``: its digits and scale, never an exponent."""
    if value.is_finite():
        return format(value, "f")
    if value.is_nan():
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


def timestamp_text(value: datetime) -> str:
    """A datetime as Postgres writes it: an aware one in UTC with ``+00``, a naive one as is;
    microseconds only when there are some, without trailing zeros."""
    if value.tzinfo is None:
        text = value.isoformat(" ")
        return text.rstrip("0") if value.microsecond else text
    if value.utcoffset():
        value = value.astimezone(UTC)
    text = value.isoformat(" ")[:-6]  # without its "+00:00"
    return (text.rstrip("0") if value.microsecond else text) + "+00"


def time_text(value: time) -> str:
    """A time as Postgres writes a ``time`` (or a ``timetz``, with its offset)."""
    text = value.replace(tzinfo=None).isoformat()
    if value.microsecond:
        text = text.rstrip("0")
    offset = value.utcoffset()
    if offset is None:
        return text
    seconds = int(offset.total_seconds())
    sign = "-" if seconds < 0 else "+"
    hours, rest = divmod(abs(seconds), 3600)
    minutes, secs = divmod(rest, 60)
    zone = f"{sign}{hours:02d}" + (f":{minutes:02d}" if minutes or secs else "")
    return text + zone + (f":{secs:02d}" if secs else "")


def _invalid(column: str, value: Any, why: str) -> ExportRowInvalidError:
    return ExportRowInvalidError(
        f"column {column!r}: {type(value).__name__} value refused — {why}",
        meta={"column": column, "type": type(value).__name__},
    )


class Encoder(Protocol):
    """What the export pass needs from a format."""

    extension: str
    content_type: str

    def header(self) -> bytes:
        """The bytes part 0 starts with (empty for a format without a header)."""
        ...

    def encode(self, rows: Iterable[Mapping[str, Any]]) -> bytes:
        """The lines of ``rows``, each ending in a newline."""
        ...


class CsvEncoder:
    """CSV as Postgres writes it, with OWASP neutralisation; ``bom=True`` starts the header
    with a BOM."""

    extension = "csv"
    content_type = "text/csv; charset=utf-8"

    def __init__(self, columns: Sequence[str], *, bom: bool = False) -> None:
        self.columns = tuple(columns)
        self.bom = bom

    def header(self) -> bytes:
        cells = quoted([neutralise(c) for c in self.columns])
        return ((BOM if self.bom else "") + csv_lines([[c] for c in cells])).encode()

    def encode(self, rows: Iterable[Mapping[str, Any]]) -> bytes:
        """Column by column: each column's cells are rendered by the one conversion its
        types need (``str`` for ints, decimals, dates, UUIDs; a look at the first character
        for text), then quoted where needed and joined into lines. The answer is the same as
        converting every cell on its own, only cheaper."""
        columns = self.columns
        held = rows if isinstance(rows, list) else list(rows)
        if not held:
            return b""
        n = len(columns)
        # Rows that are sequences whose first columns are ours, in order (asyncpg records of
        # keyset's SELECT), are read by position; anything else by name.
        positional = type(held[0]) is not dict and _leading_keys(held[0], n) == columns
        values: Sequence[Any] = held if positional else _values(held, columns)
        by_column = list(zip(*values, strict=True))
        return csv_lines([_column_cells(by_column[j], columns[j]) for j in range(n)]).encode()


def _values(rows: Iterable[Mapping[str, Any]], columns: tuple[str, ...]) -> list[tuple[Any, ...]]:
    """Each row's values in the columns' order (None where a row lacks one)."""
    rows = rows if isinstance(rows, list) else list(rows)
    if len(columns) == 1:
        (only,) = columns
        return [(row.get(only),) for row in rows]
    getter = itemgetter(*columns)
    try:
        return list(map(getter, rows))
    except KeyError:
        return [tuple([row.get(c) for c in columns]) for row in rows]


# Exact types whose ``str()`` is their cell and never holds a comma, quote or line break
# (subclasses, bools, floats, decimals and times go cell by cell: their text is not ``str()``).
_STR_IS_CELL = frozenset({int, UUID, date})
_NONE = type(None)
_FIRST = itemgetter(slice(0, 1))


def _column_cells(column: tuple[Any, ...], name: str) -> list[str]:
    """The cells of one column as text, neutralised and quoted."""
    kinds = set(map(type, column))
    if kinds == {datetime}:
        return _timestamps(column)
    if kinds <= _STR_IS_CELL:
        return list(map(str, column))
    if kinds <= _STR_IS_CELL | {_NONE}:
        return ["" if v is None else str(v) for v in column]
    if kinds == {Decimal}:
        # str() is Postgres' form unless it chose an exponent (never for what asyncpg decodes).
        texts = list(map(str, column))
        return texts if "E" not in "".join(texts) else list(map(numeric_text, column))
    look = _NEEDS_A_LOOK
    if kinds == {str}:
        if look.isdisjoint(map(_FIRST, column)):
            return quoted(list(column))
        return quoted([v if v[:1] not in look else neutralise(v) for v in column])
    if kinds == {str, _NONE}:
        return quoted([v if v is None or v[:1] not in look else neutralise(v) for v in column])
    return quoted([_cell(v, name) for v in column])


def _timestamps(column: tuple[datetime, ...]) -> list[str]:
    """A column of datetimes; those asyncpg decodes (UTC, whole seconds) by one ``map``."""
    texts = list(map(datetime.isoformat, column, repeat(" ")))
    if all(t.endswith("+00:00") and len(t) == 25 for t in texts):
        return [t[:-6] + "+00" for t in texts]
    return list(map(timestamp_text, column))


def _leading_keys(row: Any, n: int) -> tuple[str, ...] | None:
    keys = getattr(row, "keys", None)
    if keys is None or not hasattr(row, "__len__") or isinstance(row, Mapping):
        return None
    return tuple(keys())[:n]


def _cell(value: Any, column: str) -> str | None:
    # The common cases inline: the slow path calls this once per cell of its column.
    if type(value) is str:
        return value if not value or value[0] not in _NEEDS_A_LOOK else neutralise(value)
    if type(value) is int:
        return str(value)
    return csv_cell(value, column)


class JsonlEncoder:
    """One JSON object a line through orjson, keys in the columns' order."""

    extension = "jsonl"
    content_type = "application/x-ndjson"

    def __init__(self, columns: Sequence[str]) -> None:
        self.columns = tuple(columns)

    def header(self) -> bytes:
        return b""

    def encode(self, rows: Iterable[Mapping[str, Any]]) -> bytes:
        columns = self.columns
        out: list[bytes] = []
        for row in rows:
            ordered = {c: row.get(c) for c in columns}
            try:
                out.append(
                    orjson.dumps(ordered, default=_json_default, option=orjson.OPT_APPEND_NEWLINE)
                )
            except orjson.JSONEncodeError as exc:
                raise _jsonl_invalid(ordered, exc) from None
        return b"".join(out)


def _json_default(value: Any) -> Any:
    if isinstance(value, Decimal) and value.is_finite():
        return format(value, "f")
    raise TypeError


def _jsonl_invalid(row: Mapping[str, Any], exc: Exception) -> ExportRowInvalidError:
    for column, value in row.items():
        try:
            orjson.dumps(value, default=_json_default)
        except orjson.JSONEncodeError:
            return _invalid(column, value, "orjson cannot encode it; convert it in row()")
    return ExportRowInvalidError(f"the row cannot be encoded as JSON: {exc}")


def encoder_for(format: str, columns: Sequence[str], *, bom: bool = False) -> Encoder:
    """The encoder of ``format`` (``'csv'`` or ``'jsonl'``)."""
    if format == "csv":
        return CsvEncoder(columns, bom=bom)
    if format == "jsonl":
        if bom:
            raise InvariantError("bom=True is a CSV option; JSONL is never written with a BOM")
        return JsonlEncoder(columns)
    raise InvariantError(f"format must be 'csv' or 'jsonl', got {format!r}")
