"""Helpers for the backfill tests: a table in memory read through ``keyset``, and a handle
that records what it was given."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ujobs.backfill import KeysetSource, keyset
from ujobs.context import cross_tenant_reason
from ujobs.signal import Signal


@dataclass
class Table:
    """Rows ``{"id": n, "slug": None}``; ``pages`` counts the statements the source ran."""

    size: int
    rows: list[dict[str, Any]] = field(default_factory=list)
    pages: list[Any] = field(default_factory=list)
    scopes: list[str | None] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rows = [{"id": n, "slug": None} for n in range(1, self.size + 1)]

    def source(self, _ctx: Any = None) -> KeysetSource:
        async def fetch(after: Any, limit: int) -> list[dict[str, Any]]:
            self.pages.append(after)
            self.scopes.append(cross_tenant_reason())
            start = 0 if after is None else int(after)
            return [dict(r) for r in self.rows if r["id"] > start][:limit]

        return keyset(fetch, key="id")

    def unslugged(self, _ctx: Any = None) -> int:
        return sum(1 for r in self.rows if r["slug"] is None)


@dataclass
class Writer:
    """``handle(rows, signal)``: writes each row's slug (an upsert: safe to replay)."""

    table: Table
    calls: list[list[int]] = field(default_factory=list)
    signals: list[Any] = field(default_factory=list)
    fail_on_call: int | None = None

    async def __call__(self, rows: Sequence[dict[str, Any]], signal: Signal) -> None:
        self.calls.append([r["id"] for r in rows])
        self.signals.append(signal)
        if self.fail_on_call is not None and len(self.calls) == self.fail_on_call:
            raise RuntimeError("the database went away mid-page")
        ids = {r["id"] for r in rows}
        for row in self.table.rows:
            if row["id"] in ids:
                row["slug"] = f"post-{row['id']}"
