"""Neutralising CSV that Postgres wrote (``COPY … TO STDOUT (FORMAT csv)``), in place.

``keyset(copy=True)`` lets the server format a whole page — the fastest CSV there is — and
this module makes it as safe to open as the encoder's: a cell whose text leads with ``=``,
``+``, ``-``, ``@``, TAB, CR or LF (also behind spaces or quotes) gets a ``'`` in front, and a
plain negative number stays a number.

It never parses the page. One regular expression finds the places a dangerous cell could start
(right after a comma or a line break, or at the page's start); almost always there are none and
the page passes through untouched. Each place found is confirmed by the quotes before it: an
even number of ``"`` since the page began means the comma or line break is a real separator and
not text inside a quoted cell. Postgres quotes a cell that holds a comma, a quote, CR or LF, so
an unquoted cell ends at the next comma or line break.
"""

from __future__ import annotations

import re

__all__ = ["neutralise_csv"]

# A separator (comma or LF), then either a quoted cell's opening quote with spaces, ' or
# doubled quotes before a formula lead, or an unquoted cell's spaces and ' before one (CR and
# LF only ever sit inside quotes: a bare one is a record's end). Starting with the separator
# lets the engine skip to the next comma or LF; the page's first cell is matched on its own.
_LEAD = rb"""(?:"(?:""|[ '])*[=+\-@\t\r\n]|[ ']*[=+\-@\t])"""
_CANDIDATE = re.compile(rb"[,\n]" + _LEAD)
_FIRST = re.compile(_LEAD)

# A coarse pass first, on the page mapped to four classes (1 separator, 2 formula lead, 3 space
# or quote, 0 anything else): a separator, then spaces or quotes, then a lead — or a separator
# (LF may lead a quoted cell). It runs ~4x faster than _CANDIDATE and finds a superset of its
# places, each then confirmed by _CANDIDATE itself.
_CLASSES = bytes(
    1 if ch in b",\n" else 2 if ch in b"=+-@\t\r" else 3 if ch in b" '\"" else 0
    for ch in range(256)
)
_COARSE = re.compile(rb"\x01\x03*\x02|\x01\x03+(?=\x01)")
_PLAIN_NEGATIVE = re.compile(rb"-(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def neutralise_csv(page: bytes) -> bytes:
    """``page`` (whole CSV records) with every dangerous cell neutralised."""
    inserts: list[int] = []
    quotes = 0
    counted_to = 0
    coarse = _COARSE.finditer(page.translate(_CLASSES))
    starts = [m.start() + 1 for m in coarse if _CANDIDATE.match(page, m.start())]
    if _FIRST.match(page):
        starts.insert(0, 0)
    for start in starts:
        quotes += page.count(b'"', counted_to, start)
        counted_to = start
        if quotes % 2:
            continue  # inside a quoted cell: not a cell start
        if page[start : start + 1] == b'"':
            inserts.append(start + 1)
            continue
        end = _cell_end(page, start)
        if _PLAIN_NEGATIVE.fullmatch(page, start, end):
            continue
        inserts.append(start)
    if not inserts:
        return page
    out: list[bytes] = []
    at = 0
    for position in inserts:
        out.append(page[at:position])
        out.append(b"'")
        at = position
    out.append(page[at:])
    return b"".join(out)


def _cell_end(page: bytes, start: int) -> int:
    ends = [i for i in (page.find(b",", start), page.find(b"\n", start)) if i != -1]
    return min(ends) if ends else len(page)
