"""One claimed row, from the claim to the slot freed: what a worker does with each run.

In order: the job's handle (a name this code does not declare is handed back — in a rolling
deploy an older worker may claim a newer job); the process limits (``LimitConfig`` — over any
cap the row is SHED: handed back, no attempt burned); the fleet ``concurrency`` slot
(``concurrency``); then ``execute_job`` with the run's signal (drain, lost lease),
``before_settle`` = the heartbeat's stop, and ``lease_left`` = what is left of the heartbeat's
window (a settle the store could not take is sent again within it), and ``lease_check`` = the
heartbeat's window checked on the spot (``Renewals.lapsed``: before the body, each step and
each step's save — a lapsed one aborts the attempt there). A run is HELD — its pool
slot, its limiter lease — from its claim until its settle is SENT: then its body is over, the
worker frees the slot and kicks a pass, so the next claim overlaps the ack's round trip instead
of waiting behind it (a run holding a fleet slot frees its pool slot only once that slot is
released: by the settle itself, which carries it — ``ujobs.worker.concurrency``). The
``finally`` releases a fleet slot the settle did not (a settle that did not land, a path that
never settled) and frees whatever else it left.

A row claimed AHEAD (``ClaimedJob.ahead``: it may have waited in the claim-ahead buffer) is
marked started (``driver.start_ahead``, not awaited) once its body has run
``START_MARK_DELAY_MS``; a row handed back, shed or refused never needs it
(``ujobs.worker.claim_ahead``).

Only settled executions move ``jobs_total`` (``JobExecution.jobs_total``); a row handed back
due inside a minute arms the loop's timer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from ujobs.clock import Clock
from ujobs.drivers.base import ClaimedJob, JobDriver
from ujobs.events.bus import EventBus
from ujobs.execution.attempt import execute_job, hand_back, refuse_job
from ujobs.execution.outage import LeaseLeft
from ujobs.execution.outcome import JobExecution, release_frames
from ujobs.execution.scope import ContextSpec
from ujobs.jobs.job import JobHandle
from ujobs.jobs.registry import Registry
from ujobs.lifecycle import Lifecycle
from ujobs.loop_probes import Signals
from ujobs.metrics import JobMetrics
from ujobs.worker.concurrency import acquire_slot, claimed_slot, lease_holder
from ujobs.worker.heartbeat import FleetSlot, HeldRun
from ujobs.worker.limits import Limiter
from ujobs.worker.options import WorkerOptions

log = logging.getLogger("ujobs.worker")

START_MARK_DELAY_MS = 10
"""How long a row claimed ahead runs before it is marked started (``Runner._mark_started``)."""


@dataclass(slots=True)
class RunCounters:
    """What the worker did with the rows it claimed (``stats()`` reads these)."""

    claimed: int = 0
    settled: int = 0
    refused: int = 0
    shed: int = 0
    waited: int = 0
    unknown: int = 0


class Runner:
    """Runs claimed rows for one worker; holds nothing but its dependencies and counters."""

    def __init__(
        self,
        *,
        driver: JobDriver,
        registry: Registry,
        context: ContextSpec,
        clock: Clock,
        events: EventBus | None,
        options: WorkerOptions,
        metrics: JobMetrics,
        signals: Signals,
        lifecycle: Lifecycle | None,
        due_at: Callable[[int], bool],
        finished: Callable[[HeldRun], None],
        lapsed: Callable[[HeldRun], BaseException | None],
    ) -> None:
        self.driver = driver
        self.registry = registry
        self.context = context
        self.clock = clock
        self.events = events
        self.options = options
        self.metrics = metrics
        self.signals = signals
        self.lifecycle = lifecycle
        self.limiter = Limiter(options.limits, clock) if options.limits is not None else None
        self.counters = RunCounters()
        self._totals: dict[tuple[str, str], Any] = {}
        self._due_at = due_at
        self._finished = finished
        self._lapsed = lapsed
        self._starting: set[asyncio.Future[bool]] = set()
        self._to_mark: list[HeldRun] = []
        self._mark_timer: asyncio.TimerHandle | None = None

    async def run(self, held: HeldRun) -> None:
        """The task of one claimed row."""
        lifecycle = self.lifecycle
        if lifecycle is not None:
            lifecycle.work_started()  # the drain's in-flight phase waits for it
        try:
            execution = await self._attempt(held)
            if execution.settled:
                held.slot = None  # the settle released it in its own write (``ClaimedJob.slot``)
            self._after(execution)
        except asyncio.CancelledError:
            raise  # abandoned at the drain deadline: no settle, the lease lapses
        except Exception:
            log.exception("jobs.worker.run-failed", extra=held.fields())
        finally:
            if held.slot is not None:
                await self._release(held)
            self._finished(held)
            if lifecycle is not None:
                lifecycle.work_finished()

    def _attempt(self, held: HeldRun) -> Awaitable[JobExecution]:
        """The run's attempt: ``execute_job``'s own coroutine for a known job under no limit, no
        fleet slot and no concurrency key (no frame of this method's around it); the others go
        through ``_gated``."""
        claimed = held.claimed
        handle = self.registry.job(claimed.name)
        if (
            handle is None
            or claimed.slot is not None
            or self.limiter is not None
            or handle.concurrency is not None
        ):
            return self._gated(held, handle)
        return self._execute(held, handle, None)

    async def _gated(self, held: HeldRun, handle: JobHandle[Any] | None) -> JobExecution:
        claimed = held.claimed
        if claimed.slot is not None:  # the claim took it: the run's settle releases it
            held.slot = FleetSlot(claimed.slot, lease_holder(claimed))
        if handle is None:
            self.counters.unknown += 1
            return await hand_back(
                claimed,
                driver=self.driver,
                reason="unknown-job",
                before_settle=held.stop,
                lease_left=self._lease_left(held),
            )
        if self.limiter is not None:
            lease = self.limiter.try_acquire(claimed.queue, claimed.tenant_id)
            if isinstance(lease, str):
                return await self._shed(held, lease)
            held.limit_lease = lease
        failure: BaseException | None = None
        if handle.concurrency is not None:
            leases = self.driver.leases
            if leases is None:  # start() refuses this for every job registered by then
                log.error("jobs.worker.concurrency-unenforceable", extra=held.fields())
                return await self._wait(held, "no-lease-store")
            decision = None
            if claimed.slot is not None:
                decision = await claimed_slot(leases, handle, claimed)
            if decision is None:
                decision = await acquire_slot(
                    leases, handle, claimed, ttl_ms=self.options.visibility_timeout_ms
                )
            held.slot = decision.slot
            claimed = _settles_slot(held)
            if decision.kind == "wait":
                return await self._wait(held, decision.reason)
            if decision.kind == "refuse":
                self.counters.refused += 1
                return await refuse_job(
                    claimed,
                    driver=self.driver,
                    handle=handle,
                    context=self.context,
                    before_settle=held.stop,
                    lease_left=self._lease_left(held),
                )
            failure = decision.error
        return await self._execute(held, handle, failure)

    def _execute(
        self, held: HeldRun, handle: JobHandle[Any], failure: BaseException | None
    ) -> Awaitable[JobExecution]:
        claimed = held.claimed  # with the slot it settles (``_settles_slot``)
        return execute_job(
            claimed,
            driver=self.driver,
            handle=handle,
            context=self.context,
            clock=self.clock,
            events=self.events,
            signal=held.signal,
            before_settle=held.stop,
            lease_left=self._lease_left(held),
            lease_check=partial(self._lapsed, held),
            failure=failure,
            body_running=partial(self._mark_started, held) if claimed.ahead else None,
            body_ended=held.end_body if claimed.ahead else None,
        )

    def _mark_started(self, held: HeldRun) -> None:
        """A row claimed ahead whose body did not end in its first step (``execute_job``'s
        ``body_running``). Its ``start_ahead`` is sent ``START_MARK_DELAY_MS`` later, and only
        if its body is still running then (``HeldRun.body_over``): a short body's settle says
        all a mark would (no-op bodies never pay for one, however busy the loop), and nothing
        waits for it.
        Awaited before every body, the mark halved the drain; sent for every body, it cost a
        fifth. What the delay leaves: a worker that dies within it of a body's start gives that
        row back uncounted, as if never started — the claim caps that at
        ``AHEAD_RETURNS_MAX`` times a row, so a poison pill still exhausts its attempts."""
        self._to_mark.append(held)
        if self._mark_timer is None:
            self._mark_timer = asyncio.get_running_loop().call_later(
                START_MARK_DELAY_MS / 1000, self._send_marks
            )

    def _send_marks(self) -> None:
        self._mark_timer = None
        runs, self._to_mark = self._to_mark, []
        for held in runs:
            if not held.renewable or held.body_over:
                continue  # over, settled (or being), or no longer ours: nothing to mark
            claimed = held.claimed
            sent = asyncio.ensure_future(self.driver.start_ahead(claimed.id, claimed.ref))
            self._starting.add(sent)
            sent.add_done_callback(partial(self._started, held))

    def _started(self, held: HeldRun, sent: asyncio.Future[bool]) -> None:
        self._starting.discard(sent)
        if sent.cancelled():
            return
        error = sent.exception()
        if error is not None:
            log.warning("jobs.worker.start-failed", extra={**held.fields(), "error": repr(error)})
        elif not sent.result() and held.renewable:
            # Not running under this claim any more (cancelled, lapsed): the heartbeat and the
            # fenced step writes report and stop it as for any run.
            log.info("jobs.worker.start-unowned", extra=held.fields())

    async def _shed(self, held: HeldRun, cap: str) -> JobExecution:
        self.counters.shed += 1
        claimed = held.claimed
        delay: int | None = None
        if cap == "rate_per_tenant" and self.limiter is not None and claimed.tenant_id:
            delay = max(
                self.options.poll_interval_ms, self.limiter.next_token_in_ms(claimed.tenant_id)
            )
        log.debug("jobs.worker.shed", extra={**held.fields(), "cap": cap})
        return await hand_back(
            claimed,
            driver=self.driver,
            reason="shed",
            delay_ms=delay,
            before_settle=held.stop,
            lease_left=self._lease_left(held),
        )

    async def _wait(self, held: HeldRun, reason: str) -> JobExecution:
        """A busy concurrency slot: back to ready, uncounted, due again after one poll."""
        self.counters.waited += 1
        log.debug("jobs.worker.slot-busy", extra={**held.fields(), "reason": reason})
        return await hand_back(
            held.claimed,
            driver=self.driver,
            reason="limit",
            delay_ms=self.options.poll_interval_ms,
            before_settle=held.stop,
            lease_left=self._lease_left(held),
        )

    def _lease_left(self, held: HeldRun) -> LeaseLeft:
        """How much of ``held``'s lease is left: the heartbeat's window, from the last renewal
        that landed (the claim counts as the first), on the worker's clock. A settle the store
        could not take is sent again within it (``ujobs.execution.outage``); the heartbeat is
        stopped by then, so the window only shrinks."""
        window, clock = self.options.visibility_timeout_ms, self.clock
        return lambda: held.last_landed_ms + window - clock.now_ms()

    def _after(self, execution: JobExecution) -> None:
        total = execution.jobs_total
        if total is not None:
            counter = self._totals.get((execution.queue, total))
            if counter is None:  # the labelled child, looked up once per (queue, outcome)
                counter = self.metrics.jobs_total.labels(queue=execution.queue, outcome=total)
                self._totals[(execution.queue, total)] = counter
            counter.inc()
        if execution.settled:
            self.counters.settled += 1
            if execution.outcome == "snoozed":
                self.metrics.jobs_snoozed.labels(queue=execution.queue).inc()
            if execution.resume_at_ms is not None:
                self._due_at(execution.resume_at_ms)
        if execution.error is not None:
            # Kept in the worker's recent history: not with everything the body held.
            release_frames(execution.error)
        self.signals.emit("settled", execution)

    async def _release(self, held: HeldRun) -> None:
        """The fleet slot of a run whose settle did not land (it raised, was refused, or never
        was sent): released on its own, as a settle would have."""
        slot, leases = held.slot, self.driver.leases
        if slot is None or leases is None:
            return
        with contextlib.suppress(asyncio.CancelledError):
            try:
                await leases.release(slot.key, slot.holder)
            except Exception as exc:
                log.warning(
                    "jobs.worker.slot-release-failed",
                    extra={**held.fields(), "key": slot.key, "error": repr(exc)},
                )


def _settles_slot(held: HeldRun) -> ClaimedJob:
    """``held.claimed`` with ``slot`` the key the run holds now (``held.slot``), so its settle
    releases that one: the claim's slot given back for another key, or none taken."""
    key = None if held.slot is None else held.slot.key
    if held.claimed.slot != key:
        held.claimed = replace(held.claimed, slot=key)
    return held.claimed
