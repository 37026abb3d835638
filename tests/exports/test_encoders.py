"""The encoders: CSV that is safe to open (OWASP) and valid (RFC 4180), JSONL through orjson."""

from __future__ import annotations

import csv
import io
import re
from datetime import UTC, date, datetime, time, timedelta, timezone
from decimal import Decimal
from typing import Any
from uuid import UUID

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ujobs.errors import ExportRowInvalidError, InvariantError
from ujobs.exports.encoders import (
    BOM,
    CsvEncoder,
    JsonlEncoder,
    csv_cell,
    encoder_for,
    float_text,
    neutralise,
)

PLAIN_NEGATIVE = re.compile(r"-(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


@pytest.mark.parametrize(
    "text",
    [
        "=1+2",
        "+1",
        "-1+2",
        "@SUM(A1)",
        "\t=cmd",
        "\r=cmd",
        "\n=cmd",
        "  =cmd",
        '"=cmd',
        "'=cmd",
        " \"' @x",
        "-",
        "-cmd|' /C calc'!A0",
        '=HYPERLINK("http://evil")',
    ],
)
def test_a_formula_lead_is_neutralised_with_a_quote(text: str) -> None:
    assert neutralise(text) == "'" + text


@pytest.mark.parametrize("text", ["-12", "-12.50", "-0.5", "-.5", "-1e3", "-2.5E-4"])
def test_a_plain_negative_number_stays_a_number(text: str) -> None:
    assert neutralise(text) == text


@pytest.mark.parametrize("text", ["-\u0661\u0662", "-12abc"])
def test_a_negative_that_is_not_an_ascii_number_is_neutralised(text: str) -> None:
    assert neutralise(text) == "'" + text


@pytest.mark.parametrize("text", ["", "plain", "a=b", "12", "  spaced", "'quoted'", "x-y", "é=1"])
def test_harmless_text_is_left_alone(text: str) -> None:
    assert neutralise(text) == text


def parse(data: bytes) -> list[list[str]]:
    return list(csv.reader(io.StringIO(data.decode(), newline="")))


def test_csv_cells_are_neutralised_but_numbers_are_not() -> None:
    enc = CsvEncoder(["name", "amount", "balance"])
    out = enc.encode([{"name": "=HYPERLINK(1)", "amount": -5, "balance": "-5.25"}])
    assert parse(out) == [["'=HYPERLINK(1)", "-5", "-5.25"]]


def test_csv_quotes_as_postgres_does_and_ends_every_line_in_lf() -> None:
    enc = CsvEncoder(["a", "b", "c"])
    out = enc.encode(
        [
            {"a": 'say "hi"', "b": "x,y", "c": "two\nlines"},
            {"a": "plain", "b": None, "c": 1},
            {"a": "", "b": None, "c": None},
        ]
    )
    assert out == b'"say ""hi""","x,y","two\nlines"\nplain,,1\n"",,\n'
    assert parse(out) == [['say "hi"', "x,y", "two\nlines"], ["plain", "", "1"], ["", "", ""]]


def test_a_one_column_null_is_an_empty_line_and_its_end_of_data_marker_is_quoted() -> None:
    """As COPY writes them: an empty string is ``""``, a NULL nothing, ``\\.`` quoted."""
    out = CsvEncoder(["a"]).encode([{"a": ""}, {"a": None}, {"a": "\\."}, {"a": "x"}])
    assert out == b'""\n\n"\\."\nx\n'


def test_csv_header_names_the_columns_and_carries_the_bom_only_when_asked() -> None:
    assert CsvEncoder(["id", "total"]).header() == b"id,total\n"
    with_bom = CsvEncoder(["id", "total"], bom=True).header()
    assert with_bom == (BOM + "id,total\n").encode()
    assert with_bom.startswith(b"\xef\xbb\xbf")


def test_csv_writes_utf8_and_typed_values_in_postgres_text_forms() -> None:
    enc = CsvEncoder(["s", "d", "t", "u", "m", "f", "b", "n", "z", "e", "h"])
    row: dict[str, Any] = {
        "s": "Zoë ☃",
        "d": date(2024, 2, 29),
        "t": datetime(2024, 1, 2, 3, 4, 5, 250000, tzinfo=timezone(timedelta(hours=2))),
        "u": UUID(int=1),
        "m": Decimal("1E+3"),
        "f": -0.5,
        "b": True,
        "n": datetime(2024, 1, 2, 3, 4, 5),
        "z": Decimal("0.0000001"),
        "e": 1e20,
        "h": time(12, 30, 0, 500000, tzinfo=timezone(timedelta(hours=5, minutes=30))),
    }
    out = enc.encode([row])
    assert out.decode("utf-8") == (
        "Zoë ☃,2024-02-29,2024-01-02 01:04:05.25+00,"
        "00000000-0000-0000-0000-000000000001,1000,-0.5,t,2024-01-02 03:04:05,0.0000001,"
        "1e+20,12:30:00.5+05:30\n"
    )


@pytest.mark.parametrize(
    ("value", "text"),
    [(0.0, "0"), (-0.0, "-0"), (1.0, "1"), (0.1, "0.1"), (1e14, "100000000000000"),
     (1e15, "1e+15"), (1e-4, "0.0001"), (1.5e-5, "1.5e-05"), (float("inf"), "Infinity"),
     (float("nan"), "NaN"), (-1.25e300, "-1.25e+300")],
)  # fmt: skip
def test_floats_are_written_as_postgres_writes_a_float8(value: float, text: str) -> None:
    assert float_text(value) == text


@pytest.mark.parametrize("value", [{"nested": 1}, [1, 2], b"bytes", object()])
def test_a_value_csv_cannot_carry_is_refused_naming_the_column(value: Any) -> None:
    with pytest.raises(ExportRowInvalidError) as caught:
        CsvEncoder(["id", "payload"]).encode([{"id": 1, "payload": value}])
    assert caught.value.code == "X_EXPORT_ROW_INVALID"
    assert caught.value.meta["column"] == "payload"


def test_jsonl_is_one_object_a_line_in_column_order() -> None:
    enc = JsonlEncoder(["b", "a", "when", "amount"])
    out = enc.encode(
        [
            {
                "a": 1,
                "b": "=x",
                "when": datetime(2024, 1, 1, tzinfo=UTC),
                "amount": Decimal("2.50"),
            },
            {"a": 2, "b": None, "when": None, "amount": None},
        ]
    )
    lines = out.split(b"\n")
    assert lines[-1] == b""
    assert lines[0] == b'{"b":"=x","a":1,"when":"2024-01-01T00:00:00+00:00","amount":"2.50"}'
    assert orjson.loads(lines[1]) == {"b": None, "a": 2, "when": None, "amount": None}
    assert enc.header() == b""


def test_jsonl_refuses_a_value_orjson_cannot_encode_naming_the_column() -> None:
    with pytest.raises(ExportRowInvalidError) as caught:
        JsonlEncoder(["id", "blob"]).encode([{"id": 1, "blob": object()}])
    assert caught.value.meta["column"] == "blob"


def test_encoder_for_refuses_an_unknown_format_and_a_bom_on_jsonl() -> None:
    assert isinstance(encoder_for("csv", ["a"], bom=True), CsvEncoder)
    with pytest.raises(InvariantError):
        encoder_for("xlsx", ["a"])
    with pytest.raises(InvariantError):
        encoder_for("jsonl", ["a"], bom=True)


@given(st.lists(st.text(), min_size=1, max_size=4))
def test_csv_round_trips_any_text_and_no_cell_reads_as_a_formula(cells: list[str]) -> None:
    columns = [f"c{i}" for i in range(len(cells))]
    enc = CsvEncoder(columns)
    out = enc.encode([dict(zip(columns, cells, strict=True))])
    assert out.endswith(b"\n")
    (parsed,) = parse(out)
    for original, cell in zip(cells, parsed, strict=True):
        assert cell in (original, "'" + original)
        stripped = cell.lstrip(" \"'")
        if cell == original and cell:
            plain_negative = PLAIN_NEGATIVE.fullmatch(cell) is not None
            assert plain_negative or not stripped or stripped[0] not in "=+-@\t\r\n"


CELL_VALUES = st.one_of(
    st.text(),
    st.sampled_from(["", "=1", "-2.5", " ,x", '"q"', "a\rb", "a\nb"]),
    st.none(),
    st.integers(),
    st.booleans(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.decimals(allow_nan=False, allow_infinity=False, places=4),
    st.dates(),
    st.datetimes(timezones=st.sampled_from([None, UTC])),
    st.uuids(),
)


EMPTY = "\x00empty\x00"  # stands for an empty string in the reference: the csv module
# writes one unquoted, where Postgres (and the encoder) write ``""`` to tell it from a NULL


@given(
    st.integers(min_value=2, max_value=4).flatmap(
        lambda width: st.lists(st.lists(CELL_VALUES, min_size=width, max_size=width), min_size=1)
    )
)
def test_csv_lines_are_what_the_csv_module_writes_for_the_same_cells(rows: list[list[Any]]) -> None:
    """The encoder joins lines itself for speed; the stdlib writer is the reference (with
    ``""`` for an empty string, as Postgres writes it; one-column lines have their own test)."""
    columns = [f"c{i}" for i in range(len(rows[0]))]
    out = CsvEncoder(columns).encode([dict(zip(columns, r, strict=True)) for r in rows])
    expected = []
    for r in rows:
        line = io.StringIO()  # CRLF as the terminator, so that a lone CR is quoted too
        csv.writer(line, dialect="excel", lineterminator="\r\n").writerow(
            [
                EMPTY if c == "" else c
                for c in (csv_cell(v, n) for v, n in zip(r, columns, strict=True))
            ]
        )
        expected.append(line.getvalue().removesuffix("\r\n").replace(EMPTY, '""') + "\n")
    assert out == "".join(expected).encode()
