"""``job_worker()``: the worker role — per-queue pools under one optional process cap, lease
heartbeats, fleet concurrency, the two-phase drain.

Its parts are the package's other modules (``ujobs.worker``'s map).

The drain (§ Roles; the start/stop/drain shape is every role's, ``ujobs.role``): ``start()``
registers a PAIR of lifecycle hooks (unless ``drain_on_shutdown=False``). ``accept`` stops
claiming, aborts every held run's signal with ``X_DRAINING`` (``JobDrainedError`` naming the
worker and the signal) and announces ``draining`` on the registry row at once — a body that
unwinds is ``interrupted``: back to ready, its attempt uncounted; one that finishes completes.
Each run is counted with the lifecycle's ``begin_work()``, so the wait for it happens in the
drain's in-flight phase. ``close`` waits for what is left within the drain's deadline
(``configure_lifecycle(deadline_ms=)``), then logs ``jobs.worker.drain-abandoned`` for the runs
still going (their tasks are cancelled unsettled: the leases lapse and the queue delivers them
again), removes the registry row, closes the driver and reaches ``stopped``. A manual
``stop()`` aborts nothing and, with no deadline, waits as long as its jobs take. Both are safe
twice.

Metrics: ``jobs_total{queue,outcome}`` per settled execution, ``job_leases_lost_total``, and the
two process gauges ``job_worker_in_flight`` / ``job_worker_capacity`` (summed over the live
workers; a stopped worker leaves both). The QUEUE gauges (``queue_depth``,
``queue_oldest_ready_seconds``, ``queue_dead_jobs``) are fleet-wide facts, so the worker does
NOT refresh them: with N replicas each exporting the same depth, a ``sum()`` over pods would
multiply it. Whoever serves ``/metrics`` for the fleet (the api) calls
``JobMetrics.refresh_queue_gauges(driver)`` on scrape.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence

from ujobs.clock import Clock
from ujobs.drivers.base import ClaimedJob, ExhaustedJob, JobDriver
from ujobs.errors import JobDrainedError
from ujobs.events.bus import EventBus
from ujobs.execution.on_settled import announce_exhausted
from ujobs.execution.scope import ContextSpec
from ujobs.execution.store_loss import store_loss_report
from ujobs.jobs.registry import Api, Registry
from ujobs.jobs.registry import registry as process_registry
from ujobs.lifecycle import Lifecycle
from ujobs.loop_probes import Signals
from ujobs.metrics import JobMetrics, job_metrics
from ujobs.role import Role
from ujobs.wake.local import on_enqueued
from ujobs.wake.protocol import QueueWake, idle_ceiling_ms
from ujobs.worker.claim_ahead import Prefetch
from ujobs.worker.claim_loop import ClaimLoop, PassResult
from ujobs.worker.claimed_run import Runner
from ujobs.worker.concurrency import check_enforceable, claim_slots, claim_waits, job_lease_key
from ujobs.worker.drain import drain_reason, wait_out
from ujobs.worker.heartbeat import HeartbeatTimer, HeldRun, Renewals
from ujobs.worker.limits import LimitConfig
from ujobs.worker.options import (
    CLAIM_AHEAD_FLOOR_PER_SLOT,
    CLAIM_AHEAD_MAX_PER_SLOT,
    DEFAULT_POLL_INTERVAL_MS,
    DEFAULT_VISIBILITY_TIMEOUT_MS,
    JOBS_CONCURRENCY_DEFAULT,
    Concurrency,
    Fairness,
    WorkerOptions,
    build_options,
    unregistered_queues,
)
from ujobs.worker.presence import RegistryBeat
from ujobs.worker.slots import Slots
from ujobs.worker.stats import WorkerState, WorkerStats

log = logging.getLogger("ujobs.worker")

SIGNAL_HISTORY = 1_000
SETTLED_HISTORY = 100
"""The ``settled`` executions the worker keeps for its awaitable hooks (``ujobs.loop_probes``),
apart from its other events: each holds its run's result (up to ``UJOBS_RESULT_MAX_BYTES``),
so a thousand of them is hundreds of megabytes kept for nothing in production."""


class JobWorker(Role):
    role_name = "worker"

    def __init__(
        self,
        *,
        driver: JobDriver,
        context: ContextSpec,
        options: WorkerOptions,
        registry: Registry,
        clock: Clock,
        events: EventBus | None,
        wake: QueueWake | None,
        metrics: JobMetrics,
        lifecycle: Lifecycle | None,
    ) -> None:
        super().__init__(lifecycle=lifecycle, drain_on_shutdown=options.drain_on_shutdown)
        self.driver = driver
        self.context = context
        self.options = options
        self.registry = registry
        self.clock = clock
        self.wake = wake
        self.metrics = metrics
        # Awaitable test hooks. A short history: every settled run is emitted, and a long
        # one keeps thousands of executions alive for the garbage collector to walk.
        self.signals = Signals(history=SIGNAL_HISTORY, caps={"settled": SETTLED_HISTORY})
        self.slots = Slots(options.concurrency, options.max_in_flight)
        self.held: dict[tuple[str, int], HeldRun] = {}
        self._drain_reason: JobDrainedError | None = None
        self._served = frozenset(options.queues)
        self.loop = ClaimLoop(
            driver=driver,
            options=options,
            slots=self.slots,
            clock=clock,
            dispatch=self._dispatch,
            on_exhausted=self._on_exhausted,
            drop_exhausted=self._drop_exhausted(),
            claim_slots=claim_slots(self.registry),
            claim_waits=claim_waits(self.registry),
            idle_ceiling_ms=self.idle_ceiling_ms,
            signals=self.signals,
            ahead=self._ahead,
        )
        self.prefetch = Prefetch(
            driver=driver,
            limit=min(options.claim_ahead, CLAIM_AHEAD_MAX_PER_SLOT * self.slots.capacity)
            if len(options.queues) == 1
            else 0,
            floor=CLAIM_AHEAD_FLOOR_PER_SLOT * self.slots.capacity,
            started=lambda: self.runner.counters.claimed,  # the runs started so far: the pace
            visibility_ms=options.visibility_timeout_ms,
            start=self._start,
            can_start=self.slots.can_take,
        )
        self.renewals = Renewals(
            driver=driver,
            clock=clock,
            held=self.held,
            visibility_ms=options.visibility_timeout_ms,
            interval_ms=options.heartbeat_interval_ms,
            metrics=metrics,
        )
        self.runner = Runner(
            driver=driver,
            registry=registry,
            context=context,
            clock=clock,
            events=events,
            options=options,
            metrics=metrics,
            signals=self.signals,
            lifecycle=None,  # set by start() when the worker drains with the process
            due_at=self.loop.due_at,
            finished=self._finished,
            lapsed=self.renewals.lapsed,
        )
        self.registry_beat = RegistryBeat(
            registry=driver.workers,
            worker_id=options.worker_id,
            queues=options.queues,
            slots=options.capacity,
            in_flight=lambda: [key[0] for key in self.held],
            ttl_ms=options.visibility_timeout_ms,
            interval_ms=options.heartbeat_interval_ms,
            clock=clock,
        )
        self.heartbeat = HeartbeatTimer(
            renewals=self.renewals,
            clock=clock,
            interval_ms=options.heartbeat_interval_ms,
            beat_due=self.registry_beat.due_at,
            beat=self.registry_beat.beat_soon,
        )

    # -- identity and figures -----------------------------------------------------------------

    @property
    def id(self) -> str:
        return self.options.worker_id

    @property
    def state(self) -> WorkerState:
        return self.phase

    @property
    def hook_name(self) -> str:
        return f"worker {self.id}"

    def idle_ceiling_ms(self) -> int:
        """``idle_poll_max_ms`` when declared; else 5 s while the wake is live, 2 s without."""
        return idle_ceiling_ms(self.wake, self.options.idle_poll_max_ms)

    def stats(self) -> WorkerStats:
        c = self.runner.counters
        return WorkerStats(
            worker_id=self.id,
            state=self.phase,
            in_flight=self.slots.in_flight,
            max_in_flight=self.options.max_in_flight,
            capacity=self.slots.capacity,
            in_flight_by_queue=self.slots.by_queue(),
            claimed=c.claimed,
            settled=c.settled,
            refused=c.refused,
            shed=c.shed,
            waited=c.waited,
            unknown=c.unknown,
            passes=self.loop.passes,
            next_timer_ms=self.loop.timers.next_due_ms,
        )

    # -- claimed rows ---------------------------------------------------------------------------

    def _drop_exhausted(self) -> frozenset[str]:
        return frozenset(n for n, h in self.registry.jobs.items() if not h.retry.dead_letter)

    def _ahead(self) -> int:
        return self.prefetch.room() if self.phase == "running" else 0

    def _dispatch(self, claimed: ClaimedJob, sent_ms: int) -> None:
        """A claimed row: run it when its queue has a slot, else (claimed ahead) buffer it.
        Without claim-ahead every row claimed has its slot (the pass asked for the room)."""
        prefetch = self.prefetch
        if prefetch.limit > 0 and (prefetch.rows or not self.slots.can_take(claimed.queue)):
            self.prefetch.hold(claimed, sent_ms)
            self.prefetch.feed()
            return
        self._start(claimed, sent_ms)

    def _start(self, claimed: ClaimedJob, sent_ms: int) -> None:
        held = HeldRun(claimed, sent_ms, self.options.heartbeat_interval_ms)
        if self._drain_reason is not None:
            held.signal.abort(self._drain_reason)  # claimed by the pass the drain caught
        held.on_settling = self._settling
        self.held[(claimed.id, claimed.claim)] = held
        self.slots.take(claimed.queue)
        self.runner.counters.claimed += 1
        held.task = asyncio.get_running_loop().create_task(self.runner.run(held))

    def _settling(self, held: HeldRun) -> None:
        """The run's ack/nack is being SENT: its body is over, so its pool slot (and limiter
        lease) is free now and a pass is kicked — the next claim overlaps the settle's round
        trip. A run holding a fleet ``concurrency`` slot keeps its pool slot until that slot
        is released (by the settle's own write, so until the settle answers), so this worker
        never meets its own finished run's slot on the next claim."""
        if held.slot is None:
            self._free(held)

    def _free(self, held: HeldRun) -> None:
        if held.freed:
            return
        held.freed = True
        if held.limit_lease is not None:
            held.limit_lease.release()
        self.slots.give(held.claimed.queue)
        self.prefetch.feed()
        self.loop.kick()

    def _held_under(self, epoch: str) -> int:
        """How many running rows were claimed under the keyspace mark ``epoch``."""
        return sum(1 for held in self.held.values() if held.claimed.store_epoch == epoch)

    def _finished(self, held: HeldRun) -> None:
        claimed = held.claimed
        self.held.pop((claimed.id, claimed.claim), None)
        self._free(held)

    async def _on_exhausted(self, rows: Sequence[ExhaustedJob]) -> None:
        """The claim buried rows whose lease lapsed on their final attempt: announce them."""
        announced = await announce_exhausted(rows, jobs=self.registry, context=self.context)
        for row, told in zip(rows, announced, strict=True):
            self.metrics.record_outcome(
                row.queue, "dead" if told.outcome == "dead-lettered" else "failed"
            )
            self.signals.emit("exhausted", told)

    def _on_wake(self, queue: str) -> None:
        served = queue in self._served
        self.signals.emit("wake", (queue, served))
        if served:
            self.loop.kick()

    # -- test and operator entry points ----------------------------------------------------------

    async def run_once(self) -> PassResult:
        """One claim pass now (the rows it claims run as tasks; ``join()`` waits for them)."""
        return await self.loop.run_once()

    async def heartbeat_once(self) -> None:
        """One heartbeat tick now, waiting for the renewals it sent (tests on a frozen clock)."""
        sent = self.heartbeat.tick()
        if sent:
            await asyncio.wait(sent)

    async def join(self) -> None:
        """Wait until this worker holds no run."""
        while self.held:
            tasks = {h.task for h in self.held.values() if h.task is not None}
            if not tasks:
                return
            await asyncio.wait(tasks)

    # -- start ----------------------------------------------------------------------------------

    def _before_start(self) -> None:
        """Refuses (``X_JOB_CONCURRENCY_UNENFORCEABLE``) when a registered job declares
        ``concurrency`` and the driver has no lease store."""
        check_enforceable(self.driver, self.registry)
        for queue in unregistered_queues(self.options, self.registry):
            log.warning(
                "jobs.worker.queue-unregistered",
                extra={"queue": queue, "worker_id": self.id, "polled": True},
            )
            self.signals.emit("queue-unregistered", queue)

    async def _begin(self) -> None:
        self.loop.drop_exhausted = self._drop_exhausted()
        self.loop.claim_slots = claim_slots(self.registry)
        self.loop.claim_waits = claim_waits(self.registry)
        if self.drains_with_lifecycle:
            self.runner.lifecycle = self.lifecycle
        self.on_stop(
            self.metrics.track_worker(
                self, lambda: self.slots.in_flight, lambda: self.slots.capacity
            )
        )
        self.on_stop(on_enqueued(self._on_wake))
        store_loss = store_loss_report(self.driver)
        if store_loss is not None:  # a wiped keyspace names how many rows this worker ran
            self.on_stop(store_loss.count_held(self._held_under))
        if self.wake is not None:
            self.on_stop(self.wake.subscribe(self._on_wake))
        await self.registry_beat.beat()
        self.heartbeat.start()
        self.loop.start()
        log.info(
            "jobs.worker.started",
            extra={
                "worker_id": self.id,
                "queues": list(self.options.queues),
                "capacity": self.slots.capacity,
                "max_in_flight": self.options.max_in_flight,
            },
        )

    # -- the drain ------------------------------------------------------------------------------

    def _halt(self) -> None:
        """Stop claiming, hand back what was claimed ahead, announce ``draining``."""
        self.loop.halt()
        self.prefetch.close()
        self.registry_beat.announce_draining()

    def _on_drain(self) -> None:
        """The drain's own signal: abort every held run with X_DRAINING (a ``stop()`` aborts
        nothing; a SIGTERM landing during one still does)."""
        if self._drain_reason is not None:
            return  # a second SIGTERM
        signal_name = self.lifecycle.last_signal if self.drains_with_lifecycle else None
        reason = drain_reason(self.id, signal_name)
        self._drain_reason = reason
        for held in list(self.held.values()):
            held.signal.abort(reason)
        log.info(
            "jobs.worker.draining",
            extra={
                "worker_id": self.id,
                "in_flight": len(self.held),
                "signal": reason.meta["signal"],
            },
        )
        self.signals.emit("draining", len(self.held))

    async def _wind_down(self) -> None:
        """What is left, within the deadline: the pass in flight, the rows claimed ahead, the
        held runs (abandoned at the deadline), the heartbeat, the registry row, the driver."""
        if not await self.loop.join(self.remaining_s()):
            log.warning("jobs.worker.claim-abandoned", extra={"worker_id": self.id})
        self.prefetch.close()  # a row the last pass claimed ahead goes back too
        await self.prefetch.settle(self.remaining_s())
        await wait_out(self.held, self.deadline, worker_id=self.id, signals=self.signals)
        await self.heartbeat.stop()
        await self.registry_beat.remove()
        if self.options.close_driver:
            try:
                await self.driver.close()
            except Exception as exc:
                log.warning("jobs.worker.close-failed", extra={"error": repr(exc)})

    def _on_stopped(self) -> None:
        log.info("jobs.worker.stopped", extra={"worker_id": self.id})
        self.signals.emit("stopped", self.id)


def job_worker(
    *,
    driver: JobDriver,
    context: ContextSpec,
    queues: Iterable[str] | None = None,
    concurrency: Concurrency = JOBS_CONCURRENCY_DEFAULT,
    max_in_flight: int | None = None,
    limits: LimitConfig | None = None,
    visibility_timeout_ms: int = DEFAULT_VISIBILITY_TIMEOUT_MS,
    heartbeat_interval_ms: int | None = None,
    poll_interval_ms: int = DEFAULT_POLL_INTERVAL_MS,
    idle_poll_max_ms: int | None = None,
    registry: Registry | Api | None = None,
    clock: Clock | None = None,
    events: EventBus | None = None,
    wake: QueueWake | None = None,
    metrics: JobMetrics | None = None,
    drain_on_shutdown: bool = True,
    close_driver: bool = True,
    worker_id: str | None = None,
    lifecycle: Lifecycle | None = None,
    claim_ahead: int = 0,
    fair: Fairness = True,
) -> JobWorker:
    """The worker role. ``driver`` and ``context`` are required; everything else defaults
    (see ``ujobs.worker.options``). ``clock`` defaults to the driver's (every lease window,
    timer and step stamp then reads one clock). ``registry`` defaults to the process registry (what
    ``define_api`` installed); ``lifecycle`` to the process lifecycle; ``metrics`` to the
    process's series; ``wake`` to none (in-process enqueues still wake it); ``claim_ahead`` to 0
    (see ``ujobs.worker.options``); ``fair`` to True: every queue tenant-fair (False, or
    ``{queue: False}``, serves those queues first-in first-out)."""
    reg = registry.registry() if isinstance(registry, Api) else registry or process_registry()
    options = build_options(
        queues=queues,
        registered_queues=[h.queue for h in reg.jobs.values()],
        concurrency=concurrency,
        max_in_flight=max_in_flight,
        limits=limits,
        visibility_timeout_ms=visibility_timeout_ms,
        heartbeat_interval_ms=heartbeat_interval_ms,
        poll_interval_ms=poll_interval_ms,
        idle_poll_max_ms=idle_poll_max_ms,
        drain_on_shutdown=drain_on_shutdown,
        close_driver=close_driver,
        worker_id=worker_id,
        claim_ahead=claim_ahead,
        fair=fair,
    )
    return JobWorker(
        driver=driver,
        context=context,
        options=options,
        registry=reg,
        clock=clock if clock is not None else driver.clock,
        events=events,
        wake=wake,
        metrics=metrics if metrics is not None else job_metrics(),
        lifecycle=lifecycle,
    )


__all__ = ["JobWorker", "WorkerOptions", "WorkerStats", "job_lease_key", "job_worker"]
