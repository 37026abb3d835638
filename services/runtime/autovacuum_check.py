"""A warning at start when autovacuum does not run on ``x_jobs``.

``x_jobs`` churns: every job is inserted, updated at each claim and settle, and deleted by the
purge, so its dead rows and its statistics move all day. The per-table settings of
``0001_jobs.sql`` make autovacuum keep up, but only on a server where it runs; with it off, the
table bloats and every process keeps the plans it made on a young table (a claim planned on an
empty ``x_jobs`` scans it whole), so claims, settles and webhook deliveries slow as rows
accumulate, with no error to say why. The same holds when the server does not count row
changes (``track_counts = off``: autovacuum then never sees a table to vacuum) or ``x_jobs`` was
opted out (``autovacuum_enabled = off``). Settings the project cannot make for the server, so
each one found is named, with what to set, in ONE warning line per service start; not refused:
a deployment may vacuum on its own schedule.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from ujobs.drivers.postgres.sql import query

log = logging.getLogger("ujobs.service")

AUTOVACUUM_OFF = "ujobs.service.autovacuum-off"


class _Reader(Protocol):
    async def fetchval(self, query: str, *args: Any) -> Any: ...


async def warn_without_autovacuum(pool: _Reader, service: str) -> bool:
    """Log ``ujobs.service.autovacuum-off`` naming what to set when autovacuum does not run on
    ``x_jobs``; answers whether it did."""
    fixes: list[str] = list(await pool.fetchval(query("server_autovacuum")) or [])
    if not fixes:
        return False
    log.warning(
        AUTOVACUUM_OFF,
        extra={
            "service": service,
            "set": "; ".join(fixes),
            "hint": "autovacuum does not run on x_jobs here: x_jobs and the ledgers bloat and "
            "keep stale statistics, and claims slow as rows accumulate; set "
            + "; ".join(fixes)
            + " (the tables carry their own settings) or run VACUUM ANALYZE on a schedule",
        },
    )
    return True
