"""``orders_export``: ``rows`` numbered rows in pages of 10, to the default sink.

``slow_ms`` waits before each page, so a process test can kill the exporter mid-export. The
job ``plain_job`` is not an export (the download routes refuse its id).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from exports import export_rows, iterate
from exports.sources import IteratorSource
from shared import Run, job, t


def numbered(run: Run[Any]) -> IteratorSource[dict[str, Any]]:
    total = int(run.input.rows)
    slow_s = int(run.input.slow_ms) / 1000

    async def rows(start: int) -> AsyncIterator[dict[str, Any]]:
        for i in range(start, total):
            if slow_s and i % 10 == 0:
                await asyncio.sleep(slow_s)
            yield {"id": i, "name": f"row {i}", "note": "=1+1" if i % 7 == 1 else f"n{i}"}

    return iterate(rows)


orders_export = export_rows(
    name="orders.export",
    input=t.object(
        org_id=t.string, export_id=t.string, rows=t.number.int(), slow_ms=t.number.int()
    ),
    tenant=lambda i: i.org_id,
    prefix=lambda i: f"exports/{i.org_id}/{i.export_id}",
    source=numbered,
    columns=["id", "name", "note"],
    batch=10,
)


@job(name="plain.job", idempotency_key=lambda i: "plain", tenant="none")
async def plain_job(run: Run[Any]) -> None:
    return None


def expected_csv(rows: int) -> bytes:
    """The artifact ``orders_export`` writes for ``rows`` rows."""
    lines = ["id,name,note"]
    for i in range(rows):
        note = "'=1+1" if i % 7 == 1 else f"n{i}"
        lines.append(f"{i},row {i},{note}")
    return ("\n".join(lines) + "\n").encode()
