"""``job_scheduler()``: fires each task's occurrences, one leader at a time, one round at a time.

A round, every ``tick_interval_ms``:

1. every ``leader.renew_every_ms`` (not every round) it asks the leader for the lease — the
   renewal, and how a demoted node learns it lost. Gaining leadership re-reads the watermarks
   from the store; losing it forgets them.
2. while it leads, it dispatches the tasks that are DUE. The due time of each task (the first
   occurrence after its watermark) is held in memory, so an idle round reads no store and
   resolves no cron.
3. a due task is checked against the paused tasks (one read for the round): a paused one is
   not dispatched and is looked at again after ``PAUSE_RECHECK_MS``; on resume its own catch-up
   policy decides what it missed.
4. a task with no watermark is ARMED — its watermark set to now, nothing fired. Otherwise its
   policy picks the occurrence(s) to fire: ``skip`` the TRUE latest missed one (bisection),
   ``run-once`` the earliest (and the watermark passes the rest), ``run-all`` every one, at most
   ``max_catch_up`` a round. Each fire is ``state.fire``: the watermark and the jobs move
   together, or not at all (another scheduler got there first).
5. once a minute the leader folds the driver's counters (``rollup_counters()``).

Drain (``stop()`` or the process lifecycle's pair of hooks): stop dispatching, finish the round
in flight, release the lease. A round still ENQUEUEING at the deadline keeps the lease instead —
promoting a standby onto an occurrence this node is mid-dispatch for is the double fire leader
election exists to prevent — and the lease lapses on its own.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from shared.clock import SYSTEM_CLOCK, Clock
from shared.cron import CronSchedule, latest_occurrence, schedule_of
from shared.drivers.base import JobDriver
from shared.errors import ConfigInvalidError
from shared.hooks import Signals
from shared.leader import Leader, always_leader
from shared.lifecycle import Deadline, Lifecycle, process_lifecycle
from shared.registry import registry
from shared.scheduler_state import SchedulerState, memory_scheduler_state
from shared.tasks import CatchUp, TaskHandle

log = logging.getLogger("ujobs.scheduler")

DEFAULT_TICK_INTERVAL_MS = 1_000
PAUSE_RECHECK_MS = 5_000
"""A task found paused is looked at again after this long: the resume's latency."""
ROLLUP_EVERY_MS = 60_000
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
class _Slot:
    """A task's in-memory view while this node leads."""

    task: TaskHandle
    schedule: CronSchedule
    watermark: int | None = None
    first: int | None = None  # the first occurrence after the watermark; None: never again
    check_at: int | None = None  # when the round looks at it next; None: never


class JobScheduler:
    def __init__(
        self,
        *,
        driver: JobDriver,
        state: SchedulerState | None = None,
        leader: Leader | None = None,
        tasks: Iterable[TaskHandle] | None = None,
        tick_interval_ms: int = DEFAULT_TICK_INTERVAL_MS,
        clock: Clock = SYSTEM_CLOCK,
        lifecycle: Lifecycle | None = None,
    ) -> None:
        if isinstance(tick_interval_ms, bool) or not isinstance(tick_interval_ms, int):
            raise ConfigInvalidError("tick_interval_ms must be a whole number of milliseconds")
        if tick_interval_ms < 1:
            raise ConfigInvalidError("tick_interval_ms must be at least 1")
        self.driver = driver
        self.state: SchedulerState = state if state is not None else memory_scheduler_state(driver)
        self.leader: Leader = leader if leader is not None else always_leader()
        self.tick_interval_ms = tick_interval_ms
        self.clock = clock
        self.signals = Signals()
        self._given_tasks = list(tasks) if tasks is not None else None
        self._slots: dict[str, _Slot] | None = None
        self._lifecycle = lifecycle
        self._unregister: list[Callable[[], None]] = []
        self._leading = False
        self._lease_until: int | None = None
        self._next_acquire_at = -math.inf
        self._next_rollup_at = -math.inf
        self._round_lock = asyncio.Lock()
        self._enqueueing = False
        self._stopping = False
        self._wake = asyncio.Event()
        self._loop: asyncio.Task[None] | None = None
        self._closing: asyncio.Task[None] | None = None

    # -- tasks --------------------------------------------------------------------------------

    @property
    def tasks(self) -> list[TaskHandle]:
        return [slot.task for slot in self._task_slots().values()]

    def _task_slots(self) -> dict[str, _Slot]:
        if self._slots is None:
            tasks = (
                self._given_tasks
                if self._given_tasks is not None
                else list(registry().tasks.values())
            )
            self._slots = {t.name: _Slot(t, schedule_of(t)) for t in tasks}
        return self._slots

    @property
    def stopping(self) -> bool:
        """Whether the drain began: no round starts after the one in flight."""
        return self._stopping

    @property
    def leading(self) -> bool:
        return self._leading

    def watermark(self, task: str) -> int | None:
        """The watermark held in memory for ``task`` (None when not leading or not armed)."""
        slot = self._task_slots().get(task)
        return slot.watermark if slot is not None else None

    def next_due(self, task: str) -> int | None:
        slot = self._task_slots().get(task)
        return slot.check_at if slot is not None else None

    # -- one round ----------------------------------------------------------------------------

    async def run_once(self) -> RoundResult:
        """One dispatch round (tests drive the scheduler with this and a frozen clock)."""
        async with self._round_lock:
            result = RoundResult()
            now = self.clock.now_ms()
            await self._lead(now)
            result.leading = self._leading
            if not self._leading:
                return result
            due = [
                s
                for s in self._task_slots().values()
                if s.check_at is not None and s.check_at <= now
            ]
            if due:
                paused = await self._paused_tasks(due)
                if paused is None:
                    return result
                for slot in due:
                    await self._dispatch(slot, now, paused, result)
            await self._rollup(now)
            self.signals.emit("round", result)
            return result

    async def _lead(self, now: int) -> None:
        if now >= self._next_acquire_at:
            try:
                held = await self.leader.acquire()
            except Exception as exc:
                log.warning("jobs.scheduler.lease-failed", extra={"error": repr(exc)})
                self._next_acquire_at = now  # ask again next round
            else:
                self._next_acquire_at = now + self.leader.renew_every_ms
                if held:
                    ttl = self.leader.ttl_ms
                    self._lease_until = now + ttl if ttl is not None else None
                    if not self._leading:
                        await self._gain(now)
                elif self._leading:
                    self._demote("lost")
        if self._leading and self._lease_until is not None and now >= self._lease_until:
            self._demote("lapsed")

    async def _gain(self, now: int) -> None:
        try:
            stored = await self.state.load()
        except Exception as exc:
            log.warning("jobs.scheduler.state-unreadable", extra={"error": repr(exc)})
            self._next_acquire_at = now
            return
        for slot in self._task_slots().values():
            slot.watermark = stored.get(slot.task.name)
            if slot.watermark is None:
                slot.first = None
                slot.check_at = now  # arm in this round
            else:
                slot.first = slot.schedule.next_after(slot.watermark)
                slot.check_at = slot.first
        self._leading = True
        self._next_rollup_at = now
        log.info("jobs.scheduler.leading", extra={"tasks": len(self._task_slots())})
        self.signals.emit("leader", True)

    def _demote(self, reason: str) -> None:
        self._leading = False
        self._lease_until = None
        for slot in self._task_slots().values():
            slot.watermark = slot.first = slot.check_at = None
        log.warning("jobs.scheduler.demoted", extra={"reason": reason})
        self.signals.emit("leader", False)

    async def _paused_tasks(self, due: Sequence[_Slot]) -> set[str] | None:
        introspect = self.driver.introspect
        if introspect is None or all(s.watermark is None for s in due):
            return set()
        try:
            return set(await introspect.paused_tasks())
        except Exception as exc:
            # Firing blind could fire a paused task; the due tasks stay due for the next round.
            log.warning("jobs.scheduler.pauses-unreadable", extra={"error": repr(exc)})
            return None

    async def _dispatch(self, slot: _Slot, now: int, paused: set[str], result: RoundResult) -> None:
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
        if task.catch_up == "run-all":
            occurrence: int | None = first
            for _ in range(task.max_catch_up):
                if occurrence is None or occurrence > now:
                    break
                missed = slot.schedule.next_after(occurrence)
                late = missed is not None and missed <= now
                if not await self._fire(slot, occurrence, occurrence, now, late, result):
                    return
                occurrence = slot.first
            return
        second = slot.schedule.next_after(first)
        if second is None or second > now:
            await self._fire(slot, first, first, now, False, result)
        elif task.catch_up == "skip":
            latest = latest_occurrence(slot.schedule, slot.watermark, now, first_ms=second)
            assert latest.occurrence_ms is not None
            await self._fire(
                slot,
                latest.occurrence_ms,
                latest.occurrence_ms,
                now,
                True,
                result,
                evaluations=latest.evaluations + 1,  # + the second occurrence, which found the gap
            )
        else:  # run-once: the earliest, once; the watermark passes the rest
            await self._fire(slot, first, now, now, True, result)

    async def _arm(self, slot: _Slot, now: int, result: RoundResult) -> None:
        try:
            await self.state.advance(slot.task.name, now)
        except Exception as exc:
            log.warning(
                "jobs.scheduler.arm-failed", extra={"task": slot.task.name, "error": repr(exc)}
            )
            slot.check_at = now + FIRE_RETRY_MS
            return
        slot.watermark = now
        slot.first = slot.schedule.next_after(now)
        slot.check_at = slot.first
        result.armed.append(slot.task.name)
        log.info("jobs.scheduler.armed", extra={"task": slot.task.name, "watermark_ms": now})
        self.signals.emit("armed", slot.task.name)

    async def _fire(
        self,
        slot: _Slot,
        occurrence: int,
        watermark: int,
        now: int,
        missed: bool,
        result: RoundResult,
        *,
        evaluations: int = 0,
    ) -> bool:
        task = slot.task
        self._enqueueing = True
        try:
            requests = task.requests_for(occurrence)
            fired = await self.state.fire(task.name, occurrence, requests, watermark_ms=watermark)
        except Exception as exc:
            log.error(
                "jobs.scheduler.fire-failed",
                extra={"task": task.name, "occurrence_ms": occurrence, "error": repr(exc)},
            )
            slot.check_at = now + FIRE_RETRY_MS
            result.failed.append(task.name)
            return False
        finally:
            self._enqueueing = False
        if not fired:
            await self._refused(slot, occurrence, now, result)
            return False
        slot.watermark = max(watermark, slot.watermark or watermark)
        slot.first = slot.schedule.next_after(slot.watermark)
        slot.check_at = slot.first
        record = Fired(
            task.name,
            occurrence,
            slot.watermark,
            task.catch_up,
            len(requests),
            missed,
            evaluations,
        )
        result.fired.append(record)
        log.info(
            "jobs.scheduler.fired",
            extra={
                "task": task.name,
                "occurrence_ms": occurrence,
                "jobs": len(requests),
                "policy": task.catch_up,
                "missed": missed,
                "evaluations": evaluations,
            },
        )
        self.signals.emit("fired", record)
        return True

    async def _refused(self, slot: _Slot, occurrence: int, now: int, result: RoundResult) -> None:
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
        slot.watermark = max(stored if stored is not None else occurrence, occurrence)
        slot.first = slot.schedule.next_after(slot.watermark)
        slot.check_at = slot.first

    async def _rollup(self, now: int) -> None:
        introspect = self.driver.introspect
        if introspect is None or now < self._next_rollup_at:
            return
        self._next_rollup_at = now + ROLLUP_EVERY_MS
        try:
            folded = await introspect.rollup_counters()
        except Exception as exc:
            log.warning("jobs.scheduler.rollup-failed", extra={"error": repr(exc)})
            return
        self.signals.emit("rollup", folded)

    # -- the loop -----------------------------------------------------------------------------

    def _delay_s(self) -> float:
        """Until the next round: a tick, or sooner when a task or the lease falls due first.
        Anything already past due (a retry, a run-all backlog) waits a whole tick."""
        now = self.clock.now_ms()
        delay = float(self.tick_interval_ms)
        upcoming = [self._next_acquire_at]
        if self._leading:
            upcoming.extend(s.check_at for s in self._task_slots().values() if s.check_at)
        for at in upcoming:
            if at > now:
                delay = min(delay, at - now + 1)
        return delay / 1000

    async def _run(self) -> None:
        while not self.stopping:
            # Cleared BEFORE the round: a drain that starts during it leaves the wake set, so
            # the wait below returns at once and the loop ends.
            self._wake.clear()
            try:
                await self.run_once()
            except Exception as exc:
                log.error("jobs.scheduler.round-failed", extra={"error": repr(exc)})
            try:
                await asyncio.wait_for(self._wake.wait(), self._delay_s())
            except TimeoutError:
                pass

    async def start(self) -> None:
        """Start the loop and register the drain hooks; a second call does nothing."""
        if self._loop is not None:
            return
        self._task_slots()
        unsafe = [
            reason
            for reason, bad in (
                (
                    "state is not durable: a restart arms to now and loses missed occurrences",
                    not self.state.durable,
                ),
                (
                    "leader is not exclusive: a rolling update runs two leaders",
                    not self.leader.exclusive,
                ),
            )
            if bad
        ]
        if unsafe:
            log.warning(
                "jobs.scheduler.unsafe-defaults",
                extra={
                    "reasons": unsafe,
                    "fix": "pass state=postgres_scheduler_state(executor) and "
                    "leader=postgres_lease_leader(executor=executor)",
                },
            )
        lifecycle = self._lifecycle if self._lifecycle is not None else process_lifecycle()
        self._unregister.append(
            lifecycle.register(accept=self._accept, close=self._close, name="scheduler")
        )
        self._loop = asyncio.ensure_future(self._run())
        log.info(
            "jobs.scheduler.started",
            extra={"tasks": len(self._task_slots()), "tick_interval_ms": self.tick_interval_ms},
        )

    def _accept(self) -> None:
        """Stop dispatching: no round starts after this one."""
        if not self._stopping:
            self._stopping = True
            log.info("jobs.scheduler.draining")
        self._wake.set()

    async def _close(self, deadline: Deadline) -> None:
        """Finish the round in flight, then hand the lease back — unless the deadline finds the
        round still enqueueing, in which case the lease is kept and lapses on its own. A second
        caller (``stop()`` during a drain) joins the first."""
        if self._loop is None:
            return
        if self._closing is None:
            self._closing = asyncio.ensure_future(self._close_once(self._loop, deadline))
        await asyncio.shield(self._closing)

    async def _close_once(self, loop_task: asyncio.Task[None], deadline: Deadline) -> None:
        timeout = None if math.isinf(deadline.at) else deadline.remaining_s()
        done, _ = await asyncio.wait({loop_task}, timeout=timeout)
        keep_lease = False
        if not done:
            keep_lease = self._enqueueing
            if keep_lease:
                log.error(
                    "jobs.scheduler.drain-abandoned",
                    extra={"reason": "a round is still enqueueing; the lease is kept and lapses"},
                )
            loop_task.cancel()
            await asyncio.wait({loop_task})
        if self._leading and not keep_lease:
            try:
                await self.leader.release()
            except Exception as exc:
                log.warning("jobs.scheduler.release-failed", extra={"error": repr(exc)})
        self._leading = False
        for unregister in self._unregister:
            unregister()
        self._unregister.clear()
        log.info("jobs.scheduler.stopped", extra={"lease_kept": keep_lease})
        self.signals.emit("stopped", keep_lease)

    async def stop(self, deadline_ms: int | None = None) -> None:
        """Drain this scheduler: with no deadline, wait for the round in flight however long it
        takes. Safe to call twice, and before ``start()``."""
        if self._loop is None:
            return
        self._accept()
        deadline = Deadline(math.inf) if deadline_ms is None else Deadline.after_ms(deadline_ms)
        await self._close(deadline)


def job_scheduler(
    *,
    driver: JobDriver,
    state: SchedulerState | None = None,
    leader: Leader | None = None,
    tasks: Iterable[TaskHandle] | None = None,
    tick_interval_ms: int = DEFAULT_TICK_INTERVAL_MS,
    clock: Clock = SYSTEM_CLOCK,
    lifecycle: Lifecycle | None = None,
) -> JobScheduler:
    """The scheduler role. Pass ``state`` and ``leader`` in any real deployment: the defaults
    (a dict and "always the leader") fail silently and log ``jobs.scheduler.unsafe-defaults``."""
    return JobScheduler(
        driver=driver,
        state=state,
        leader=leader,
        tasks=tasks,
        tick_interval_ms=tick_interval_ms,
        clock=clock,
        lifecycle=lifecycle,
    )
