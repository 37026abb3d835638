"""Sources: where an export's rows come from, one page at a time, resumable from a cursor.

A source answers ``rows(after, limit)`` — at most ``limit`` rows that follow the cursor
``after`` (None: from the start) — and ``cursor(row)``, the JSON value that resumes right after
``row``. The export stores that cursor in a step after every page, so a killed exporter asks
for the page after the last one it finished, and never holds more than a page.

* ``keyset(...)`` (``ujobs.exports.keyset``) reads a table or a query over asyncpg by its key:
  ``WHERE key > $cursor ORDER BY key LIMIT n``, never ``OFFSET``.
* ``iterate(factory)`` exports from ANY async iterator: ``factory(after)`` is called with the
  number of rows already exported and answers an iterator of the rows from there. An iterator
  that cannot seek may skip that many rows itself (``skip(rows, n)``); that re-reads what was
  exported before a crash, so it fits sources that are cheap to replay and stable in order.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Callable
from typing import Any, Generic, Protocol, TypeVar

__all__ = ["ExportSource", "IteratorSource", "iterate", "skip"]

RowT = TypeVar("RowT")
RowT_co = TypeVar("RowT_co", covariant=True)


class ExportSource(Protocol[RowT_co]):
    """A paged, resumable read."""

    def rows(self, after: Any, limit: int) -> AsyncIterator[RowT_co]:
        """At most ``limit`` rows after the cursor ``after`` (None: the first page)."""
        ...

    def cursor(self, row: Any) -> Any:
        """The JSON-storable cursor that resumes right after ``row``."""
        ...


class IteratorSource(Generic[RowT]):
    """``iterate(factory)``: pages over an async iterator; the cursor counts rows."""

    def __init__(self, factory: Callable[[int], AsyncIterable[RowT]]) -> None:
        self._factory = factory
        self._open: AsyncIterator[RowT] | None = None
        self._position = 0
        self._last = 0

    async def rows(self, after: Any, limit: int) -> AsyncIterator[RowT]:
        start = 0 if after is None else int(after)
        if self._open is None or self._position != start:
            # A fresh attempt (or a cursor we are not at): start over from the stored count.
            await self._close()
            self._open = aiter(self._factory(start))
            self._position = start
        source = self._open
        given = 0
        while given < limit:
            try:
                row = await anext(source)
            except StopAsyncIteration:
                return
            self._position += 1
            given += 1
            self._last = self._position
            yield row

    def cursor(self, row: Any) -> Any:
        # Called on the page's last row, right after rows() handed it out.
        return self._last

    async def _close(self) -> None:
        closer = getattr(self._open, "aclose", None)
        if closer is not None:
            await closer()
        self._open = None


def iterate(factory: Callable[[int], AsyncIterable[RowT]]) -> IteratorSource[RowT]:
    """A source over an async iterator; ``factory(n)`` answers the rows after the first ``n``."""
    return IteratorSource(factory)


async def skip(rows: AsyncIterable[RowT], n: int) -> AsyncIterator[RowT]:
    """``rows`` without its first ``n`` (for a factory whose iterator cannot seek)."""
    seen = 0
    async for row in rows:
        if seen >= n:
            yield row
        else:
            seen += 1
