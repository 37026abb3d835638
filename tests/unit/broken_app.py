"""An app that exports one handle under two names: ``define_api`` refuses it at import."""

from __future__ import annotations

import sys
from typing import Any

from ujobs import Run, define_api, job


@job(idempotency_key=lambda i: "k", tenant="none")
async def notify(run: Run[Any]) -> None: ...


alert = notify  # the second alias would move the queue key

api = define_api(jobs=[sys.modules[__name__]], install=False)
