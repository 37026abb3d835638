"""``postgres_scheduler_state``: durable watermarks in ``x_scheduler_state``.

Every fire names the scheduler's job driver, and where the jobs go decides how the watermark
and the jobs move "together":

* **The jobs live beside the watermark** — no driver named (a direct call), or the Postgres
  driver over THIS executor (``postgres_driver(pool)`` and ``postgres_scheduler_state(pool)``
  on one pool, as ``ujobs scheduler`` wires them; ``announcing()`` around it is seen through).
  The fire is ONE statement (``sql/queries/scheduler_fire.sql``): the watermark moves, the
  occurrence's jobs are inserted into ``x_jobs`` (deduped exactly as the driver's enqueue
  dedupes), the fire is recorded in ``x_task_fires`` and each queue it filled is announced on
  ``x_jobs_wake`` — together or not at all. A crash between "enqueued" and "watermark moved"
  cannot exist, and two schedulers racing on one occurrence produce one fire (the second meets
  the first's committed watermark and inserts nothing). The statement's ``pg_notify`` reaches
  LISTEN workers only, so the queues it filled with due rows are then told to this process
  (``signal_enqueued``) and, through an ``announcing()`` driver's announcer, to the Redis wake.
* **The jobs live elsewhere** — the Redis driver, the memory driver, a Postgres driver on
  another pool. Inserting them into this database's ``x_jobs`` would put them where no worker
  claims them, so they go through the driver, in three steps: read the task's watermark (one
  already at the occurrence refuses the fire, nothing enqueued); ``enqueue_many`` on the
  driver; move the watermark while it is still before the occurrence, recording the fire in
  the same statement (``scheduler_fired.sql``) unless the driver records it itself
  (``introspect.record_task_fire``). A crash between the enqueue and the move leaves the
  occurrence due and it is fired again — with the SAME job and run ids (``ujobs.jobs.task.
  occurrence_ids``), which every driver's enqueue dedupes, live row or finished. Two schedulers
  racing (a lease lapsed mid-round) enqueue the same ids and one of them moves the watermark:
  still one job per entry.
"""

from __future__ import annotations

from collections.abc import Sequence

from ujobs.clock import SYSTEM_CLOCK, Clock
from ujobs.drivers.base import AnnouncesEnqueues, EnqueueRequest, JobDriver, stores_in
from ujobs.drivers.postgres.executor import PgExecutor
from ujobs.drivers.postgres.plan_settings import JitCheck
from ujobs.drivers.postgres.rows import dumps
from ujobs.drivers.postgres.sql import query
from ujobs.errors import InvariantError
from ujobs.ids import new_id
from ujobs.wake.local import signal_enqueued

_LOAD = query("scheduler_load")
_ADVANCE = query("scheduler_advance")
_FIRE = query("scheduler_fire")
_WATERMARK = query("scheduler_watermark")
_FIRED = query("scheduler_fired")


class PostgresSchedulerState:
    """``SchedulerState`` over ``x_scheduler_state``."""

    durable = True

    def __init__(self, executor: PgExecutor, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self.executor = executor
        self.clock = clock
        self._jit = JitCheck("the scheduler")

    async def load(self) -> dict[str, int]:
        rows = await self.executor.fetch(_LOAD)
        return {row["task"]: int(row["watermark_ms"]) for row in rows}

    async def advance(self, task: str, watermark_ms: int) -> None:
        await self.executor.fetch(_ADVANCE, task, watermark_ms, self.clock.now_ms())

    def fires_in_one_statement(self, driver: JobDriver | None) -> bool:
        """Whether ``driver``'s jobs live in this executor's ``x_jobs``: no driver, or the
        Postgres driver (announcing or not) over this very executor."""
        if driver is None:
            return True
        return stores_in(driver, self.executor)

    async def fire(
        self,
        task: str,
        occurrence_ms: int,
        requests: Sequence[EnqueueRequest],
        *,
        watermark_ms: int | None = None,
        driver: JobDriver | None = None,
    ) -> bool:
        watermark = occurrence_ms if watermark_ms is None else max(occurrence_ms, watermark_ms)
        if driver is None or self.fires_in_one_statement(driver):
            return await self._fire_here(task, occurrence_ms, watermark, requests, driver)
        return await self._fire_through(task, occurrence_ms, watermark, requests, driver)

    async def _fire_here(
        self,
        task: str,
        occurrence_ms: int,
        watermark: int,
        requests: Sequence[EnqueueRequest],
        driver: JobDriver | None,
    ) -> bool:
        """The one statement; then the wake for each queue that gained a due row."""
        for request in requests:
            if request.max_attempts < 1:
                raise InvariantError(
                    "max_attempts must be at least 1",
                    meta={"name": request.name, "max_attempts": request.max_attempts},
                )
        now = self.clock.now_ms()
        await self._jit.once(self.executor)
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
            [r.priority for r in requests],
        )
        row = rows[0]
        for queue in row["due_queues"] or ():
            if driver is not None and isinstance(driver, AnnouncesEnqueues):
                driver.announce(queue)  # this process, and the announcer's throttled publish
            else:
                signal_enqueued(queue)
        return bool(row["fired"])

    async def _fire_through(
        self,
        task: str,
        occurrence_ms: int,
        watermark: int,
        requests: Sequence[EnqueueRequest],
        driver: JobDriver,
    ) -> bool:
        """Enqueue on ``driver``, then move the watermark (see the module docstring)."""
        stored = await self.executor.fetch(_WATERMARK, task)
        if stored and int(stored[0]["watermark_ms"]) >= occurrence_ms:
            return False
        if requests:
            await driver.enqueue_many(list(requests))
        introspect = driver.introspect
        if introspect is not None:
            await introspect.record_task_fire(task, occurrence_ms)
        rows = await self.executor.fetch(
            _FIRED, task, occurrence_ms, watermark, self.clock.now_ms(), introspect is None
        )
        return bool(rows[0]["fired"])


def postgres_scheduler_state(
    executor: PgExecutor, *, clock: Clock = SYSTEM_CLOCK
) -> PostgresSchedulerState:
    """Durable watermarks: a replacement scheduler fires what the one it replaced dropped.
    Hand the scheduler's Postgres driver the same pool for the one-statement fire; any other
    job driver gets its jobs through its own enqueue (see the module docstring)."""
    return PostgresSchedulerState(executor, clock=clock)
