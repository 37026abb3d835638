"""``PgExecutor``: what the Postgres scheduler state and lease leader are handed.

One method, asyncpg's own ``fetch(text, *values)``, so an ``asyncpg.Pool``, a
``Connection`` and a transaction's connection are all executors without an adapter. Every
statement run through it is a named file in ``sql/queries`` and is ONE statement: nothing here
relies on two statements sharing a connection, which is what makes a pool safe to pass (and a
session advisory lock through one unsafe).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable


class Row(Protocol):
    """A result row read by column name (an ``asyncpg.Record``, a dict)."""

    def __getitem__(self, key: str, /) -> Any: ...


@runtime_checkable
class PgExecutor(Protocol):
    async def fetch(self, query: str, *args: object) -> Sequence[Row]: ...
