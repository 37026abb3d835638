"""One scheduler round's work while this node leads: what is due, arming, pauses, fires.

The ``Dispatcher`` holds each task's watermark and next due time IN MEMORY (a ``TaskSlot``), so a
round with nothing due reads no store and resolves no cron. It is filled from the store when
leadership is gained (``load``) and forgotten when it is lost (``forget``); every fire goes
through ``state.fire`` — the watermark and the jobs together, the jobs on the scheduler's own
driver, which each fire names — and a refused one re-reads the store, because another scheduler
got there first.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ujobs.drivers.base import JobDriver
from ujobs.jobs.task import CatchUp, TaskHandle
from ujobs.loop_probes import Signals
from ujobs.scheduler.catch_up import Planned, plan_fires
from ujobs.scheduler.cron import CronSchedule, schedule_of
from ujobs.scheduler.state import SchedulerState

log = logging.getLogger("ujobs.scheduler")

PAUSE_RECHECK_MS = 5_000
"""A task found paused is looked at again after this long: the resume's latency."""
FIRE_RETRY_MS = 5_000
"""A fire that raised (store down, a task whose entries do not validate) is retried after this."""


@dataclass(frozen=True, slots=True)
class Fired:
    """One occurrence that dispatched (what the ``fired`` signal carries)."""

    task: str
    occurrence_ms: int
    watermark_ms: int
    policy: CatchUp
    jobs: int
    missed: bool
    evaluations: int = 0
    """Cron resolutions spent choosing this occurrence (the ``skip`` bisection's cost)."""


@dataclass(slots=True)
class RoundResult:
    """What one round did; ``run_once()`` answers it."""

    leading: bool = False
    fired: list[Fired] = field(default_factory=list)
    armed: list[str] = field(default_factory=list)
    paused: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)


@dataclass(slots=True)
class TaskSlot:
    """A task's in-memory view while this node leads."""

    task: TaskHandle
    schedule: CronSchedule
    watermark: int | None = None
    first: int | None = None  # the first occurrence after the watermark; None: never again
    check_at: int | None = None  # when the round looks at it next; None: never


class Dispatcher:
    def __init__(
        self,
        *,
        tasks: Iterable[TaskHandle],
        driver: JobDriver,
        state: SchedulerState,
        signals: Signals,
    ) -> None:
        self.slots = {t.name: TaskSlot(t, schedule_of(t)) for t in tasks}
        self.driver = driver
        self.state = state
        self.signals = signals
        self.enqueueing = False
        """True while a fire is on its way to the store (the drain keeps the lease then)."""

    async def load(self, now: int) -> bool:
        """Read every watermark (leadership was just gained); False when the store failed."""
        try:
            stored = await self.state.load()
        except Exception as exc:
            log.warning("jobs.scheduler.state-unreadable", extra={"error": repr(exc)})
            return False
        for slot in self.slots.values():
            watermark = stored.get(slot.task.name)
            if watermark is None:
                slot.watermark = slot.first = None
                slot.check_at = now  # arm in this round
            else:
                self._resolve(slot, watermark)
        return True

    def forget(self) -> None:
        """Leadership was lost: what this node held may be stale by its next term."""
        for slot in self.slots.values():
            slot.watermark = slot.first = slot.check_at = None

    def earliest_check(self) -> int | None:
        checks = [s.check_at for s in self.slots.values() if s.check_at is not None]
        return min(checks) if checks else None

    async def dispatch(self, now: int, result: RoundResult) -> None:
        """Every due task, in declaration order. Nothing due: no store, no cron."""
        due = [s for s in self.slots.values() if s.check_at is not None and s.check_at <= now]
        if not due:
            return
        paused = await self._paused_tasks(due)
        if paused is None:
            return
        for slot in due:
            await self._dispatch(slot, now, paused, result)

    def _resolve(self, slot: TaskSlot, watermark: int) -> None:
        """Hold ``watermark`` and the task's next due time in memory: from here until then,
        rounds neither read the store nor resolve the cron for this task."""
        slot.watermark = watermark
        slot.first = slot.schedule.next_after(watermark)
        slot.check_at = slot.first
        if slot.first is None:
            log.warning(
                "jobs.scheduler.task-never-due",
                extra={"task": slot.task.name, "cron": slot.task.cron, "tz": slot.task.tz},
            )

    async def _paused_tasks(self, due: Sequence[TaskSlot]) -> set[str] | None:
        introspect = self.driver.introspect
        if introspect is None or all(s.watermark is None for s in due):
            return set()
        try:
            return set(await introspect.paused_tasks())
        except Exception as exc:
            # Firing blind could fire a paused task; the due tasks stay due for the next round.
            log.warning("jobs.scheduler.pauses-unreadable", extra={"error": repr(exc)})
            return None

    async def _dispatch(
        self, slot: TaskSlot, now: int, paused: set[str], result: RoundResult
    ) -> None:
        task = slot.task
        if slot.watermark is None:
            await self._arm(slot, now, result)
            return
        if task.name in paused:
            slot.check_at = now + PAUSE_RECHECK_MS
            result.paused.append(task.name)
            self.signals.emit("paused", task.name)
            return
        first = slot.first
        if first is None or first > now:
            slot.check_at = first
            return
        for planned in plan_fires(task, slot.schedule, slot.watermark, first, now):
            if not await self._fire(slot, planned, now, result):
                return

    async def _arm(self, slot: TaskSlot, now: int, result: RoundResult) -> None:
        try:
            await self.state.advance(slot.task.name, now)
        except Exception as exc:
            log.warning(
                "jobs.scheduler.arm-failed", extra={"task": slot.task.name, "error": repr(exc)}
            )
            slot.check_at = now + FIRE_RETRY_MS
            return
        self._resolve(slot, now)
        result.armed.append(slot.task.name)
        log.info("jobs.scheduler.armed", extra={"task": slot.task.name, "watermark_ms": now})
        self.signals.emit("armed", slot.task.name)

    async def _fire(self, slot: TaskSlot, planned: Planned, now: int, result: RoundResult) -> bool:
        """One ``state.fire``: True when it landed. A refusal re-reads the store's watermark;
        an error leaves the occurrence due, retried after ``FIRE_RETRY_MS``."""
        occurrence, watermark = planned.occurrence_ms, planned.watermark_ms
        task = slot.task
        self.enqueueing = True
        try:
            requests = task.requests_for(occurrence)
            fired = await self.state.fire(
                task.name, occurrence, requests, watermark_ms=watermark, driver=self.driver
            )
        except Exception as exc:
            log.error(
                "jobs.scheduler.fire-failed",
                extra={"task": task.name, "occurrence_ms": occurrence, "error": repr(exc)},
            )
            slot.check_at = now + FIRE_RETRY_MS
            result.failed.append(task.name)
            return False
        finally:
            self.enqueueing = False
        if not fired:
            await self._refused(slot, occurrence, now, result)
            return False
        self._resolve(slot, max(watermark, slot.watermark or watermark))
        assert slot.watermark is not None
        record = Fired(
            task.name,
            occurrence,
            slot.watermark,
            task.catch_up,
            len(requests),
            planned.missed,
            planned.evaluations,
        )
        result.fired.append(record)
        log.info(
            "jobs.scheduler.fired",
            extra={
                "task": task.name,
                "occurrence_ms": occurrence,
                "jobs": len(requests),
                "policy": task.catch_up,
                "missed": planned.missed,
                "evaluations": planned.evaluations,
            },
        )
        self.signals.emit("fired", record)
        return True

    async def _refused(
        self, slot: TaskSlot, occurrence: int, now: int, result: RoundResult
    ) -> None:
        """Another scheduler fired it first: our watermark was stale, so read the store's."""
        result.refused.append(slot.task.name)
        log.warning(
            "jobs.scheduler.fire-refused",
            extra={"task": slot.task.name, "occurrence_ms": occurrence},
        )
        self.signals.emit("refused", (slot.task.name, occurrence))
        try:
            stored = (await self.state.load()).get(slot.task.name)
        except Exception as exc:
            log.warning("jobs.scheduler.state-unreadable", extra={"error": repr(exc)})
            slot.check_at = now + FIRE_RETRY_MS
            return
        self._resolve(slot, max(stored if stored is not None else occurrence, occurrence))
