"""Neutralising CSV Postgres wrote, in place: the same cells as the encoder's rule."""

from __future__ import annotations

import csv
import io

from hypothesis import given
from hypothesis import strategies as st

from exports.copy_csv import neutralise_csv
from exports.encoders import neutralise


def write(rows: list[list[str]]) -> bytes:
    """CSV as Postgres COPY writes it: a cell quoted when it holds a comma, a quote, CR or LF,
    or is empty (NULL is the bare empty cell); LF between records."""

    def cell(text: str) -> str:
        if text == "" or any(c in text for c in ',"\r\n'):
            return '"' + text.replace('"', '""') + '"'
        return text

    return "".join(",".join(map(cell, row)) + "\n" for row in rows).encode()


def read(data: bytes) -> list[list[str]]:
    return list(csv.reader(io.StringIO(data.decode(), newline="")))


def test_a_clean_page_passes_through_as_the_same_object() -> None:
    page = write([["1", "alice", 'note, with "quotes"'], ["2", "bob", "-12.5"]])
    assert neutralise_csv(page) is page


def test_dangerous_cells_quoted_or_not_get_a_quote_in_front() -> None:
    rows = [
        ["=1+1", "ok", '"=quoted', "  @me"],
        ["-12", "-cmd", "multi\n=line", "\t=tab"],
        ["x", "=a,b", "' =x", "+1"],
        ["", "\n=lf", "", "=after empty"],
        ["", "", '""=q', "\r@cr"],
    ]
    assert read(neutralise_csv(write(rows))) == [[neutralise(c) for c in r] for r in rows]


def test_a_line_inside_a_quoted_cell_is_not_a_cell_start() -> None:
    page = write([["a", "first\n=not a cell start\n@nor this"], ["=b", "c"]])
    assert read(neutralise_csv(page)) == [
        ["a", "first\n=not a cell start\n@nor this"],
        ["'=b", "c"],
    ]


cell = st.text(st.characters(codec="utf-8", blacklist_characters="\x00"))


@given(st.lists(st.lists(cell, min_size=1, max_size=4), min_size=1, max_size=5))
def test_every_cell_ends_as_the_encoder_would_have_it(rows: list[list[str]]) -> None:
    assert read(neutralise_csv(write(rows))) == [[neutralise(c) for c in r] for r in rows]
