"""An app whose backfill counts through ``run.ctx``: its ``define_api(context=)`` yields the
resources, and the dry run must hand ``count`` the same ctx a pass's run gets (not None)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator, Sequence
from typing import Any

from ujobs import define_api
from ujobs.backfill import KeysetSource, backfill, keyset

OPENED: list[str] = []
"""What the factory did, in order: ``open``, then ``close``."""


@contextlib.asynccontextmanager
async def resources() -> AsyncIterator[dict[str, int]]:
    OPENED.append("open")
    try:
        yield {"left": 17}
    finally:
        OPENED.append("close")


def _source(_ctx: Any) -> KeysetSource:
    async def fetch(after: Any, limit: int) -> list[dict[str, Any]]:
        return []

    return keyset(fetch)


async def _handle(rows: Sequence[Any], signal: Any) -> None:
    return None


def _count(ctx: dict[str, int]) -> int:
    return ctx["left"]


counted_through_ctx = backfill(
    name="counted-through-ctx",
    tenant="none",
    source=_source,
    handle=_handle,
    count=_count,
)

api = define_api(jobs=[sys.modules[__name__]], context=resources)
