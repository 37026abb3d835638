"""RFC 4180 lines from columns of cell text, without the ``csv`` module's per-cell scan.

The CSV encoder hands over each column as the text of its cells (already neutralised), None
for a NULL; this module quotes the cells that need it and joins the lines. It quotes as
Postgres' ``COPY … (FORMAT csv)`` does, so that a page the server wrote and a page encoded
here are the same bytes: a cell is quoted when it holds a comma, a ``"`` (doubled inside) or a
line break, an empty string is ``""`` while a NULL is nothing at all (in a one-column export,
an empty line), a one-column ``\\.`` is quoted, and every line ends in LF. It costs a string
join per line instead of ``csv``'s character-by-character copy of every cell, which was most of
the decoded export's encoding time.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["csv_lines", "quoted"]

LF = "\n"
_NEEDS_QUOTES = re.compile(r'[,"\r\n]')


def quoted(cells: list[str | None]) -> list[str]:
    """``cells`` with every cell that needs quoting quoted and every NULL empty; the same list
    when none does (one scan of the joined column decides that for the common case)."""
    if None not in cells:
        plain: list[str] = cells  # type: ignore[assignment]  # no None in it: checked above
        if "" not in plain and _NEEDS_QUOTES.search("\x00".join(plain)) is None:
            return plain
    # Four substring tests stop at the first hit: cheaper per cell than the expression.
    return [
        ""
        if c is None
        else '"' + c.replace('"', '""') + '"'
        if not c or "," in c or '"' in c or "\n" in c or "\r" in c
        else c
        for c in cells
    ]


def csv_lines(columns: Sequence[Sequence[str]]) -> str:
    """The lines (each ending in LF) of cells given column by column, quoted already."""
    if not columns or not columns[0]:
        return ""
    if len(columns) == 1:
        # Alone on its line, ``\.`` is COPY's end-of-data marker: Postgres quotes it.
        lines: Sequence[str] = ['"\\."' if c == "\\." else c for c in columns[0]]
    else:
        lines = list(map(",".join, zip(*columns, strict=True)))
    return LF.join(lines) + LF
