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

Where the jobs go: ALWAYS the scheduler's ``driver`` — the one its workers claim from — which
the round hands to every ``state.fire``; the state only decides how "together" is kept.

* ``postgres_scheduler_state(pool)`` with ``postgres_driver(pool)`` on the SAME pool: one
  statement moves the watermark, inserts the jobs and records the fire.
* any other pairing (``UJOBS_DRIVER=redis``, the memory driver, a Postgres driver on another
  pool): the jobs are enqueued through the driver first and the watermark moves after. Each
  job's id and run id are derived from (task, occurrence, entry index, job name), so an
  occurrence fired again — after a crash between the two, or by a second scheduler racing the
  leader — names the rows the first fire made, and the driver's enqueue dedupes them (an id
  that already names a row inserts nothing, live or finished). Only the leader fires; the
  derived ids make a race a dedupe rather than a double.

A fire's jobs wake workers like any enqueue: this process's loops at once, other processes
through an ``announcing()`` driver's announcer (Redis) and, on Postgres, the statement's
``pg_notify``.

Drain (``stop(deadline)``, ``drain()`` or the process lifecycle's pair of hooks, as every role:
``ujobs.role``): stop dispatching, finish the round in flight, release the lease. A round still
ENQUEUEING at the deadline keeps the lease instead — promoting a standby onto an occurrence
this node is mid-dispatch for is the double fire leader election exists to prevent — and the
lease lapses on its own.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Iterable

from ujobs.clock import SYSTEM_CLOCK, Clock
from ujobs.drivers.base import JobDriver
from ujobs.jobs.registry import registry
from ujobs.jobs.task import TaskHandle
from ujobs.lifecycle import Lifecycle
from ujobs.loop_probes import Signals
from ujobs.role import Role
from ujobs.scheduler.cron import next_task_run
from ujobs.scheduler.leader import Leader, always_leader
from ujobs.scheduler.leader_postgres import postgres_lease_leader
from ujobs.scheduler.leader_watch import Leadership
from ujobs.scheduler.options import DEFAULT_TICK_INTERVAL_MS, SchedulerOptions
from ujobs.scheduler.rounds import PAUSE_RECHECK_MS, Dispatcher, Fired, RoundResult
from ujobs.scheduler.state import SchedulerState, memory_scheduler_state
from ujobs.scheduler.state_postgres import postgres_scheduler_state

log = logging.getLogger("ujobs.scheduler")

ROLLUP_EVERY_MS = 60_000


class JobScheduler(Role):
    role_name = "scheduler"

    def __init__(
        self,
        *,
        driver: JobDriver,
        options: SchedulerOptions,
        state: SchedulerState | None = None,
        leader: Leader | None = None,
        tasks: Iterable[TaskHandle] | None = None,
        clock: Clock = SYSTEM_CLOCK,
        lifecycle: Lifecycle | None = None,
    ) -> None:
        super().__init__(lifecycle=lifecycle, drain_on_shutdown=options.drain_on_shutdown)
        self.options = options
        self.driver = driver
        self.state: SchedulerState = state if state is not None else memory_scheduler_state(driver)
        self.leader: Leader = leader if leader is not None else always_leader()
        self.clock = clock
        self.signals = Signals()
        self._given_tasks = list(tasks) if tasks is not None else None
        self._dispatcher: Dispatcher | None = None
        self._leadership = Leadership(self.leader)
        self._next_rollup_at = -math.inf
        self._round_lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._loop: asyncio.Task[None] | None = None
        self._drain_abandoned = False
        self._lease_kept = False

    @property
    def tick_interval_ms(self) -> int:
        return self.options.tick_interval_ms

    # -- what it holds --------------------------------------------------------------------------

    @property
    def dispatcher(self) -> Dispatcher:
        """Built on first use, so ``tasks=None`` reads the registry as of ``start()``."""
        if self._dispatcher is None:
            tasks = (
                self._given_tasks
                if self._given_tasks is not None
                else list(registry().tasks.values())
            )
            self._dispatcher = Dispatcher(
                tasks=tasks, driver=self.driver, state=self.state, signals=self.signals
            )
        return self._dispatcher

    @property
    def tasks(self) -> list[TaskHandle]:
        return [slot.task for slot in self.dispatcher.slots.values()]

    @property
    def leading(self) -> bool:
        return self._leadership.leading

    @property
    def drain_abandoned(self) -> bool:
        """Whether the drain's deadline found a round still enqueueing (the lease was kept)."""
        return self._drain_abandoned

    def watermark(self, task: str) -> int | None:
        """The watermark held in memory for ``task`` (None when not leading or not armed)."""
        slot = self.dispatcher.slots.get(task)
        return slot.watermark if slot is not None else None

    def next_due(self, task: str) -> int | None:
        """When the next round will look at ``task`` (None: not leading, or never)."""
        slot = self.dispatcher.slots.get(task)
        return slot.check_at if slot is not None else None

    # -- one round ------------------------------------------------------------------------------

    async def run_once(self) -> RoundResult:
        """One dispatch round (tests drive the scheduler with this and a frozen clock)."""
        async with self._round_lock:
            result = RoundResult()
            now = self.clock.now_ms()
            change = await self._leadership.check(now)
            if change == "gained":
                await self._gain(now)
            elif change is not None:
                self.dispatcher.forget()
                log.warning("jobs.scheduler.demoted", extra={"reason": change})
                self.signals.emit("leader", False)
            result.leading = self.leading
            if not self.leading:
                return result
            await self.dispatcher.dispatch(now, result)
            await self._rollup(now)
            self.signals.emit("round", result)
            return result

    async def _gain(self, now: int) -> None:
        if not await self.dispatcher.load(now):
            self._leadership.retry(now)
            return
        self._leadership.confirm()
        self._next_rollup_at = now
        log.info("jobs.scheduler.leading", extra={"tasks": len(self.dispatcher.slots)})
        self.signals.emit("leader", True)

    async def _rollup(self, now: int) -> None:
        """The leader folds the driver's counters into their next tier once a minute."""
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
        upcoming = [self._leadership.next_acquire_at]
        earliest = self.dispatcher.earliest_check()
        if self.leading and earliest is not None:
            upcoming.append(earliest)
        for at in upcoming:
            if at > now:
                delay = min(delay, at - now + 1)
        return delay / 1000

    async def _run(self) -> None:
        while self.phase == "running":
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

    def _before_start(self) -> None:
        self.dispatcher  # noqa: B018 - resolve the tasks now, as of start()
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

    async def _begin(self) -> None:
        self._loop = asyncio.ensure_future(self._run())
        log.info(
            "jobs.scheduler.started",
            extra={"tasks": len(self.dispatcher.slots), "tick_interval_ms": self.tick_interval_ms},
        )

    def _halt(self) -> None:
        """Stop dispatching: no round starts after this one."""
        log.info("jobs.scheduler.draining")
        self._wake.set()

    async def _wind_down(self) -> None:
        """Finish the round in flight, then hand the lease back — unless the deadline finds the
        round still enqueueing, in which case the lease is kept and lapses on its own."""
        loop_task = self._loop
        assert loop_task is not None
        keep_lease = False
        try:
            if not await self.within_deadline(loop_task):
                keep_lease = self._drain_abandoned = self.dispatcher.enqueueing
                if keep_lease:
                    log.error(
                        "jobs.scheduler.drain-abandoned",
                        extra={
                            "reason": "a round is still enqueueing; the lease is kept and lapses"
                        },
                    )
                loop_task.cancel()
                await asyncio.wait({loop_task})
            if self.leading and not keep_lease:
                try:
                    await self.leader.release()
                except Exception as exc:
                    log.warning("jobs.scheduler.release-failed", extra={"error": repr(exc)})
        finally:
            self._leadership.step_down()
            self._lease_kept = keep_lease

    def _on_stopped(self) -> None:
        log.info("jobs.scheduler.stopped", extra={"lease_kept": self._lease_kept})
        self.signals.emit("stopped", self._lease_kept)


def job_scheduler(
    *,
    driver: JobDriver,
    state: SchedulerState | None = None,
    leader: Leader | None = None,
    tasks: Iterable[TaskHandle] | None = None,
    options: SchedulerOptions | None = None,
    clock: Clock = SYSTEM_CLOCK,
    lifecycle: Lifecycle | None = None,
) -> JobScheduler:
    """The scheduler role, with ``SchedulerOptions()`` by default. Pass ``state`` and ``leader``
    in any real deployment: the defaults (a dict and "always the leader") fail silently and log
    ``jobs.scheduler.unsafe-defaults``."""
    return JobScheduler(
        driver=driver,
        options=options if options is not None else SchedulerOptions(),
        state=state,
        leader=leader,
        tasks=tasks,
        clock=clock,
        lifecycle=lifecycle,
    )


__all__ = [
    "DEFAULT_TICK_INTERVAL_MS",
    "PAUSE_RECHECK_MS",
    "Fired",
    "JobScheduler",
    "Leader",
    "RoundResult",
    "SchedulerOptions",
    "SchedulerState",
    "always_leader",
    "job_scheduler",
    "memory_scheduler_state",
    "next_task_run",
    "postgres_lease_leader",
    "postgres_scheduler_state",
]
