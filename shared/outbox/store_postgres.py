"""``postgres_outbox_store()``: staged enqueues in ``x_outbox``.

``stage()`` runs on the CALLER's connection — the transaction bound with
``bind_transaction(conn)`` — never on the pool: that is the whole guarantee. A staged row
commits or rolls back with the business rows beside it, and its ``pg_notify`` (the relay's
wake) is delivered on COMMIT only. ``tx_executor`` maps the ambient transaction to what runs
the statement, for an app whose ambient transaction is not a bare asyncpg connection (default:
the bound object itself).

``claim``, ``release`` and ``mark_published`` run on ``executor`` (the pool), each one
autocommit statement; ``mark_published`` keeps the row with ``published_at`` set, the audit
trail ``outbox_purge_target`` clears after the retention window.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from ujobs.clock import SYSTEM_CLOCK, Clock
from ujobs.drivers.base import EnqueueRequest
from ujobs.drivers.postgres.plan_settings import JitCheck
from ujobs.drivers.postgres.rows import dumps, loads
from ujobs.drivers.postgres.sql import query
from ujobs.errors import OutboxNoTxError
from ujobs.ids import new_id
from ujobs.outbox.contract import OutboxRecord, OutboxWake, Staged

_STAGE = query("outbox_stage")
_STAGE_MANY = query("outbox_stage_many")
_CLAIM = query("outbox_claim")
_RELEASE = query("outbox_release")
_MARK = query("outbox_mark_published")
_PENDING = query("outbox_pending")

OPERATION_QUERIES: dict[str, tuple[str, ...]] = {
    "stage": ("outbox_stage", "outbox_stage_many"),
    "claim": ("outbox_claim",),
    "release": ("outbox_release",),
    "mark_published": ("outbox_mark_published",),
    "pending": ("outbox_pending",),
}


class PgFetch(Protocol):
    """What runs a statement: an asyncpg ``Pool`` or ``Connection`` (or an adapter)."""

    async def fetch(self, query: str, *args: Any) -> list[Any]: ...


class PostgresOutboxStore:
    def __init__(
        self,
        *,
        executor: PgFetch,
        tx_executor: Callable[[Any], PgFetch] | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.executor = executor
        self.tx_executor = tx_executor
        self.clock = clock
        self._last_staged_ms = 0
        self._jit = JitCheck("the outbox relay")

    @property
    def wake(self) -> OutboxWake | None:
        """None: a Postgres stage wakes the relay through LISTEN ``x_outbox_wake`` on commit
        (``ujobs.wake.listener.postgres_wake``), not in process — the row is not committed yet."""
        return None

    def _staged_at(self) -> int:
        # Monotonic per store: two stages of one transaction keep their order even if the wall
        # clock steps back between them (new_id() breaks ties inside one millisecond).
        staged_ms = max(self.clock.now_ms(), self._last_staged_ms)
        self._last_staged_ms = staged_ms
        return staged_ms

    async def stage(self, tx: Any, requests: Sequence[EnqueueRequest]) -> list[Staged]:
        if tx is None:
            raise OutboxNoTxError(
                "stage() needs the caller's transaction; bind it with bind_transaction(conn)",
            )
        conn: PgFetch = self.tx_executor(tx) if self.tx_executor is not None else tx
        staged_ms = self._staged_at()
        if len(requests) == 1:
            r = requests[0]
            rows = await conn.fetch(
                _STAGE,
                r.id or new_id(),
                r.run_id or new_id(),
                r.name,
                r.queue,
                dumps(r.input),
                r.tenant_id,
                r.idempotency_key,
                r.max_attempts,
                r.run_at_ms,
                r.traceparent,
                r.enqueued_by,
                staged_ms,
                r.priority,
            )
            return [Staged(row["id"], row["run_id"]) for row in rows]
        ids = [r.id or new_id() for r in requests]
        run_ids = [r.run_id or new_id() for r in requests]
        await conn.fetch(
            _STAGE_MANY,
            ids,
            run_ids,
            [r.name for r in requests],
            [r.queue for r in requests],
            [dumps(r.input) for r in requests],
            [r.tenant_id for r in requests],
            [r.idempotency_key for r in requests],
            [r.max_attempts for r in requests],
            [r.run_at_ms for r in requests],
            [r.traceparent for r in requests],
            [r.enqueued_by for r in requests],
            staged_ms,
            [r.priority for r in requests],
        )
        # Answered in request order from what was minted (RETURNING's order is not promised).
        return [Staged(i, run) for i, run in zip(ids, run_ids, strict=True)]

    async def claim(
        self, claimant: str, limit: int, *, now_ms: int, lease_ms: int
    ) -> list[OutboxRecord]:
        await self._jit.once(self.executor)
        rows = await self.executor.fetch(_CLAIM, claimant, limit, now_ms, lease_ms)
        return [
            OutboxRecord(
                id=r["id"],
                run_id=r["run_id"],
                name=r["name"],
                queue=r["queue"],
                input=loads(r["input"]),
                tenant_id=r["tenant_id"],
                idempotency_key=r["idempotency_key"],
                max_attempts=r["max_attempts"],
                run_at_ms=r["run_at_ms"],
                traceparent=r["traceparent"],
                enqueued_by=r["enqueued_by"],
                staged_at_ms=r["staged_at_ms"],
                claimed_by=r["claimed_by"],
                priority=r["priority"],
            )
            for r in rows
        ]

    async def release(self, ids: Sequence[str], claimant: str) -> int:
        if not ids:
            return 0
        rows = await self.executor.fetch(_RELEASE, list(ids), claimant)
        return int(rows[0]["released"])

    async def mark_published(self, record_id: str, claimant: str, *, now_ms: int) -> bool:
        rows = await self.executor.fetch(_MARK, record_id, claimant, now_ms)
        return bool(rows)

    async def pending(self) -> int:
        rows = await self.executor.fetch(_PENDING)
        return int(rows[0]["pending"])


def postgres_outbox_store(
    *,
    executor: PgFetch,
    tx_executor: Callable[[Any], PgFetch] | None = None,
    clock: Clock = SYSTEM_CLOCK,
) -> PostgresOutboxStore:
    """The outbox in ``x_outbox``. ``executor`` (the pool) runs the relay's statements;
    ``stage()`` runs on the ambient transaction's connection (mapped by ``tx_executor`` when
    the ambient transaction is not an asyncpg connection)."""
    return PostgresOutboxStore(executor=executor, tx_executor=tx_executor, clock=clock)
