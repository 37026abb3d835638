"""The fleet's shared state a driver may carry: ``LeaseStore`` (fleet-wide slots),
``WorkerRegistry`` (the worker rows) and ``BackfillLedger`` (one row per backfill pass).
Re-exported by ``ujobs.drivers.base``.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from ujobs.drivers.operator_surface import WorkerInfo
from ujobs.drivers.records import JSONValue


@runtime_checkable
class LeaseStore(Protocol):
    """Fleet-wide slots: at most ``limit`` live holders per key, each expiring after its TTL.

    Slots are numbered from 0 per key; an acquire takes the lowest free number, and a slot whose
    TTL passed is free again with no cleanup call (a SIGKILLed holder's slot comes back).
    """

    async def acquire(self, key: str, holder: str, limit: int, ttl_ms: int) -> bool:
        """Take a slot while fewer than ``limit`` live holders share ``key``. A holder that
        already holds one keeps it (TTL renewed) and answers True — never two slots."""
        ...

    async def renew(self, key: str, holder: str, ttl_ms: int) -> bool:
        """Extend ``holder``'s live slot to now + ``ttl_ms``; False when it lapsed or was
        released (the slot may be someone else's now)."""
        ...

    async def release(self, key: str, holder: str) -> None: ...

    async def holders(self, key: str) -> builtins.list[str]:
        """The live holders of ``key``, in slot-number order."""
        ...


@runtime_checkable
class WorkerRegistry(Protocol):
    """The worker rows ``workers()`` reads; a row expires ``ttl_ms`` after its last beat.

    ``in_flight`` keeps at most ``MAX_WORKER_IN_FLIGHT`` ids. ``workers()`` lists the live rows
    oldest worker first (``started_at_ms``, then id).
    """

    async def beat(
        self, info: WorkerInfo, in_flight: Sequence[str], ttl_ms: int, *, draining: bool = False
    ) -> None:
        """Upsert the row. The first beat with ``draining`` stamps ``draining_at`` for good."""
        ...

    async def remove(self, worker_id: str) -> None: ...


BackfillStatus = Literal["running", "completed", "failed"]


@dataclass(frozen=True, slots=True)
class BackfillRow:
    name: str
    run_id: str
    checksum: str
    status: BackfillStatus
    app_version: str | None
    rows_processed: int
    last_cursor: JSONValue
    started_at_ms: int
    completed_at_ms: int | None = None
    error: str | None = None
    tenant: str | None = None
    """The org the pass was scoped to; None: a pass over every tenant (``tenant="none"``)."""


@runtime_checkable
class BackfillLedger(Protocol):
    """One row per backfill pass: what has been swept (the twin of the migrations table)."""

    async def begin(
        self,
        name: str,
        run_id: str,
        checksum: str,
        app_version: str | None,
        tenant: str | None = None,
    ) -> BackfillRow:
        """Adopt this pass's row, or start one for ``tenant`` (None: every tenant); a pass is
        keyed ``(name, tenant, run_id)``, and a retry keeps its ``started_at``."""
        ...

    async def progress(
        self, name: str, run_id: str, rows: int, cursor: JSONValue, *, tenant: str | None = None
    ) -> None:
        """The running total and cursor of the pass ``(name, tenant, run_id)``: a run id is a
        namespace of its tenant, so another tenant's pass under the same id is not touched."""
        ...

    async def finish(
        self,
        name: str,
        run_id: str,
        status: BackfillStatus,
        error: str | None = None,
        *,
        tenant: str | None = None,
    ) -> None:
        """End the pass ``(name, tenant, run_id)``, as ``progress`` finds it."""
        ...

    async def list(
        self, *, name: str | None = None, status: BackfillStatus | None = None, limit: int = 100
    ) -> builtins.list[BackfillRow]: ...

    async def latest_completed(self, name: str, tenant: str | None = None) -> BackfillRow | None:
        """The newest completed pass of ``name`` in ``tenant``'s scope (None: the pass over
        every tenant): a completed pass blocks only a pass of its own scope."""
        ...
