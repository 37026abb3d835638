"""The backfill ledger in memory: the twin of ``x_backfills``, one row per pass.

A pass is keyed by ``(name, tenant, run_id)`` (a run id is a namespace of its tenant, as in
``x_backfills_pass_key``): a retry of the same run adopts its row (keeping
``started_at``, because that is when the pass began), and a forced rerun is a new job run and
therefore a new row — reruns are history, never an edit of the row they rerun.
"""

from __future__ import annotations

import builtins
from dataclasses import replace
from typing import Any

from ujobs.clock import Clock
from ujobs.drivers.base import BackfillRow, BackfillStatus
from ujobs.drivers.memory.state import json_copy
from ujobs.errors import InvariantError

JSONValue = Any
_STATUSES: frozenset[str] = frozenset({"running", "completed", "failed"})
PassKey = tuple[str, str, str]


def _pass_key(name: str, tenant: str | None, run_id: str) -> PassKey:
    """A pass's key: its name, its scope ('' for every tenant) and its run id."""
    return (name, tenant or "", run_id)


class MemoryBackfillLedger:
    """``BackfillLedger`` over a dict of (name, tenant, run id) -> row, in insertion order."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._rows: dict[PassKey, BackfillRow] = {}
        self._order: dict[PassKey, int] = {}

    async def begin(
        self,
        name: str,
        run_id: str,
        checksum: str,
        app_version: str | None,
        tenant: str | None = None,
    ) -> BackfillRow:
        if not name or not run_id:
            raise InvariantError("a backfill ledger row needs a name and a run id")
        key = _pass_key(name, tenant, run_id)
        existing = self._rows.get(key)
        if existing is not None:
            adopted = replace(
                existing,
                checksum=checksum,
                app_version=app_version,
                status="running",
                completed_at_ms=None,
                error=None,
            )
            self._rows[key] = adopted
            return adopted
        row = BackfillRow(
            name=name,
            run_id=run_id,
            checksum=checksum,
            status="running",
            app_version=app_version,
            rows_processed=0,
            last_cursor=None,
            started_at_ms=self._clock.now_ms(),
            tenant=tenant,
        )
        self._rows[key] = row
        self._order[key] = len(self._order)
        return row

    async def progress(
        self, name: str, run_id: str, rows: int, cursor: JSONValue, *, tenant: str | None = None
    ) -> None:
        """Record the pass's running total of rows and its cursor (absolute, never +=).

        A pass never begun has no row and this changes nothing: the ledger is a report, and a
        pass runs with or without one.
        """
        key = _pass_key(name, tenant, run_id)
        row = self._rows.get(key)
        if row is None:
            return
        self._rows[key] = replace(row, rows_processed=rows, last_cursor=json_copy(cursor))

    async def finish(
        self,
        name: str,
        run_id: str,
        status: BackfillStatus,
        error: str | None = None,
        *,
        tenant: str | None = None,
    ) -> None:
        if status not in _STATUSES:
            raise InvariantError(f"unknown backfill status {status!r}", meta={"status": status})
        key = _pass_key(name, tenant, run_id)
        row = self._rows.get(key)
        if row is None:
            return
        self._rows[key] = replace(
            row,
            status=status,
            error=error,
            completed_at_ms=self._clock.now_ms() if status == "completed" else None,
        )

    async def list(
        self, *, name: str | None = None, status: BackfillStatus | None = None, limit: int = 100
    ) -> builtins.list[BackfillRow]:
        """Newest pass first (started_at, then the order the passes began)."""
        if isinstance(limit, bool) or limit < 1:
            raise InvariantError("limit must be 1 or more", meta={"limit": limit})
        rows = [
            r
            for r in self._rows.values()
            if (name is None or r.name == name) and (status is None or r.status == status)
        ]
        rows.sort(
            key=lambda r: (r.started_at_ms, self._order[_pass_key(r.name, r.tenant, r.run_id)]),
            reverse=True,
        )
        return rows[:limit]

    async def latest_completed(self, name: str, tenant: str | None = None) -> BackfillRow | None:
        """The pass of ``name`` in ``tenant``'s scope that completed last — what makes a plain
        re-enqueue a no-op."""
        done = [
            r
            for r in self._rows.values()
            if r.name == name and r.status == "completed" and r.tenant == tenant
        ]
        return max(
            done,
            key=lambda r: (
                r.completed_at_ms or 0,
                self._order[_pass_key(r.name, r.tenant, r.run_id)],
            ),
            default=None,
        )
