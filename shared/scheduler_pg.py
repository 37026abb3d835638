"""``postgres_scheduler_state``: durable watermarks in ``x_scheduler_state``.

A fire is ONE statement (``sql/queries/scheduler_fire.sql``): the watermark moves, the
occurrence's jobs are inserted into ``x_jobs`` (deduped exactly as the driver's enqueue
dedupes), the fire is recorded in ``x_task_fires`` and each queue it filled is announced on
``x_jobs_wake`` — together or not at all. That is what the scheduler's guarantees rest on: a
crash between "enqueued" and "watermark moved" cannot exist, and two schedulers racing on one
occurrence produce one fire (the second meets the first's committed watermark and inserts
nothing).
"""

from __future__ import annotations

from collections.abc import Sequence

from shared.clock import SYSTEM_CLOCK, Clock
from shared.drivers.base import EnqueueRequest
from shared.drivers.postgres_rows import dumps
from shared.errors import InvariantError
from shared.ids import new_id
from shared.pg import PgExecutor
from shared.sql import query

_LOAD = query("scheduler_load")
_ADVANCE = query("scheduler_advance")
_FIRE = query("scheduler_fire")


class PostgresSchedulerState:
    """``SchedulerState`` over ``x_scheduler_state``; every call is one statement."""

    durable = True

    def __init__(self, executor: PgExecutor, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self.executor = executor
        self.clock = clock

    async def load(self) -> dict[str, int]:
        rows = await self.executor.fetch(_LOAD)
        return {row["task"]: int(row["watermark_ms"]) for row in rows}

    async def advance(self, task: str, watermark_ms: int) -> None:
        await self.executor.fetch(_ADVANCE, task, watermark_ms, self.clock.now_ms())

    async def fire(
        self,
        task: str,
        occurrence_ms: int,
        requests: Sequence[EnqueueRequest],
        *,
        watermark_ms: int | None = None,
    ) -> bool:
        watermark = occurrence_ms if watermark_ms is None else max(occurrence_ms, watermark_ms)
        for request in requests:
            if request.max_attempts < 1:
                raise InvariantError(
                    "max_attempts must be at least 1",
                    meta={"name": request.name, "max_attempts": request.max_attempts},
                )
        now = self.clock.now_ms()
        rows = await self.executor.fetch(
            _FIRE,
            task,
            occurrence_ms,
            watermark,
            now,
            [r.id or new_id() for r in requests],
            [r.run_id or new_id() for r in requests],
            [r.name for r in requests],
            [r.queue for r in requests],
            [dumps(r.input) for r in requests],
            [r.tenant_id for r in requests],
            [r.idempotency_key for r in requests],
            [r.max_attempts for r in requests],
            [r.run_at_ms if r.run_at_ms is not None else now for r in requests],
            [r.traceparent for r in requests],
            [r.enqueued_by for r in requests],
        )
        return bool(rows[0]["fired"])


def postgres_scheduler_state(
    executor: PgExecutor, *, clock: Clock = SYSTEM_CLOCK
) -> PostgresSchedulerState:
    """Durable watermarks: a replacement scheduler fires what the one it replaced dropped."""
    return PostgresSchedulerState(executor, clock=clock)
