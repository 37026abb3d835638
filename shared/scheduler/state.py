"""Where the scheduler keeps its watermarks: the ``SchedulerState`` contract and the memory one.

A watermark is, per task, the instant up to which every occurrence has been handled — fired,
or dropped by the task's catch-up policy. It only moves forward. ``fire`` moves it AND puts the
occurrence's jobs on the queue — the scheduler's job driver, which it hands to every fire — and
is refused (answers False) when the stored watermark already reached the occurrence.

"Together" has two forms. Where the jobs live beside the watermark (the Postgres state over
the Postgres driver's own pool) it is one statement, and a crash between "enqueued" and
"watermark moved" cannot exist. Anywhere else the jobs go through the driver FIRST and the
watermark moves AFTER; a crash between the two leaves the occurrence due, and firing it again
is harmless because its jobs carry ids derived from (task, occurrence, entry) (``ujobs.jobs.task.
occurrence_ids``) and every driver's enqueue inserts nothing under an id that already names a
row. Either way an occurrence's jobs exist once: the refusal keeps a second fire out once the
watermark moved, the ids dedupe one that raced it there.

The memory state is the default and is not safe to deploy: a restarted process has no
watermark, so it arms to "now" and never learns which occurrences the process it replaced
dropped. ``postgres_scheduler_state`` (``ujobs.scheduler.state_postgres``) is the durable one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

from ujobs.drivers.base import EnqueueRequest, JobDriver
from ujobs.jobs.enqueue_target import job_driver


@runtime_checkable
class SchedulerState(Protocol):
    """Durable (or not) watermarks, and the one-statement fire."""

    @property
    def durable(self) -> bool:
        """Whether a watermark outlives the process (the unsafe-defaults warning reads it)."""
        ...

    async def load(self) -> dict[str, int]:
        """Every task's watermark, by task name (epoch ms)."""
        ...

    async def fire(
        self,
        task: str,
        occurrence_ms: int,
        requests: Sequence[EnqueueRequest],
        *,
        watermark_ms: int | None = None,
        driver: JobDriver | None = None,
    ) -> bool:
        """Move the watermark to ``watermark_ms`` (default: the occurrence) and enqueue
        ``requests`` on ``driver`` (the scheduler's job driver), together, and record the task
        fire. False — nothing moved, nothing new queued — when the stored watermark is already
        at or after ``occurrence_ms``."""
        ...

    async def advance(self, task: str, watermark_ms: int) -> None:
        """Move the watermark forward without firing (arming a task). Never moves it back."""
        ...


class MemorySchedulerState:
    """A dict of watermarks; fires enqueue through the driver the fire names, else the one given
    here, else ``job_driver()``."""

    durable = False

    def __init__(
        self, driver: JobDriver | None = None, watermarks: Mapping[str, int] | None = None
    ) -> None:
        self._driver = driver
        self.watermarks: dict[str, int] = dict(watermarks or {})
        self._lock = asyncio.Lock()

    async def load(self) -> dict[str, int]:
        return dict(self.watermarks)

    async def fire(
        self,
        task: str,
        occurrence_ms: int,
        requests: Sequence[EnqueueRequest],
        *,
        watermark_ms: int | None = None,
        driver: JobDriver | None = None,
    ) -> bool:
        # One fire at a time, so two schedulers sharing this state in one process race on the
        # check below and the loser is refused. The watermark moves only after the enqueue
        # landed: an enqueue that raises leaves the occurrence due, and its rows dedupe on the
        # occurrence's derived ids when it is fired again.
        async with self._lock:
            stored = self.watermarks.get(task)
            if stored is not None and stored >= occurrence_ms:
                return False
            if driver is None:
                driver = self._driver if self._driver is not None else job_driver()
            if requests:
                await driver.enqueue_many(list(requests))
            introspect = driver.introspect
            if introspect is not None:
                await introspect.record_task_fire(task, occurrence_ms)
            target = occurrence_ms if watermark_ms is None else max(occurrence_ms, watermark_ms)
            self.watermarks[task] = max(target, stored) if stored is not None else target
            return True

    async def advance(self, task: str, watermark_ms: int) -> None:
        async with self._lock:
            stored = self.watermarks.get(task)
            if stored is None or watermark_ms > stored:
                self.watermarks[task] = watermark_ms


def memory_scheduler_state(
    driver: JobDriver | None = None, watermarks: Mapping[str, int] | None = None
) -> MemorySchedulerState:
    """The default state: a dict. Pass ``postgres_scheduler_state`` in any real deployment."""
    return MemorySchedulerState(driver, watermarks)
