"""Readiness's schema check: the api answers 503 ``X_SCHEMA_OUTDATED`` until ``ujobs db
migrate`` has applied exactly this code's migrations (the other services refuse to start:
``ujobs.services.runtime.wiring``).

The api keeps serving ``/healthz`` and ``/metrics`` meanwhile — the process is alive, it is the
database that is not ready — and turns ready on its own once the migrations land.
"""

from __future__ import annotations

import asyncio

from ujobs.drivers.postgres.migrate import schema_error, schema_state
from ujobs.errors import SchemaOutdatedError
from ujobs.services.runtime.backends import Backend

SCHEMA_READ_TIMEOUT_S = 2.0


async def schema_problem(backend: Backend, service: str) -> SchemaOutdatedError | None:
    """The refusal when the backend's Postgres holds another schema than the code's; None when
    it matches or the service runs on no Postgres at all (a Redis-only api)."""
    if backend.pool is None:
        return None
    state = await asyncio.wait_for(schema_state(backend.pool), SCHEMA_READ_TIMEOUT_S)
    return schema_error(state, service)
