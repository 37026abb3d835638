"""The app ``bench/http_edge.py`` serves: one no-op job whose key is its ``seq``."""

from __future__ import annotations

import sys
from typing import Any

from ujobs import Run, define_api, job, t


@job(
    name="bench.noop",
    input=t.object(seq=t.number.int()),
    idempotency_key=lambda i: f"http:{i.seq}",
    tenant="none",
)
async def noop(run: Run[Any]) -> None:
    """Nothing: the bench measures the enqueue."""


api = define_api(jobs=[sys.modules[__name__]])
