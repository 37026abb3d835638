"""Leases held while a run runs: the row's visibility lease and its fleet slot, renewed by ONE
timer for the whole worker (not a task per run).

Each held run renews every ``heartbeat_interval_ms``; the timer sleeps until the earliest run
(or the registry row) is due, so an idle worker's timer costs one wake per interval. What a
renewal can answer, and what is reported (§ Leases):

* a renewal failed (the driver raised), the window still has room: ``jobs.heartbeat.failed``
  (warn).
* a whole window passed with none landing: ``jobs.lease.lost`` (error, ``reason: window``) +
  ``job_leases_lost_total{queue}``; the run's signal is aborted with ``X_JOB_LEASE_LOST``.
* the row refused it — another claim holds it, or it is gone: ``jobs.lease.lost`` (error,
  ``reason: not-ours``) + the counter; aborted the same way. When the row's whole keyspace
  is gone (a Redis back empty, ``ujobs.execution.store_loss``) the reason is ``store-lost``, the
  line drops to debug and ``jobs.store.lost`` is logged once for every row.
* the row refused it because it was cancelled: ``jobs.lease.cancelled`` (info); aborted the
  same way, never counted.
* the fleet slot's renewal answered False: ``jobs.worker.slot-lost`` (error); aborted with
  ``X_JOB_SLOT_LOST``.

The timer is not the only reader of the window: ``Renewals.lapsed`` checks it on the spot
before a run's body, each step and each step's save (``ujobs.execution.steps``' ``lease_check``),
so a process frozen past its lease reports and aborts the run there, whichever timer fires first.

The window is measured from the last renewal that LANDED (the claim counts as the first), on
this process's clock, from when that renewal was SENT — so a driver whose renewal hangs is
caught the same as one that rejects: a renewal still on the wire is never sent twice, and the
next tick declares the lease lost once the window has passed.

Nothing is reported for a run that finished or is being settled: ``HeldRun.stop()`` is the
``before_settle`` the worker hands ``execute_job`` — the heartbeat stops when the ack/nack is
SENT — and it is terminal for a renewal already on the wire: its answer is dropped unread.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ujobs.clock import Clock
from ujobs.drivers.base import ClaimedJob, JobDriver, LeaseStore
from ujobs.errors import JobSlotLostError, LeaseLostError
from ujobs.execution.store_loss import STORE_LOST_REASON, store_lost
from ujobs.metrics import JobMetrics
from ujobs.signal import Signal
from ujobs.worker.limits import LimitLease

log = logging.getLogger("ujobs.worker")


@dataclass(frozen=True, slots=True)
class FleetSlot:
    """A held ``concurrency`` slot: its lease key and this run's holder id."""

    key: str
    holder: str


class HeldRun:
    """One claimed run while this worker holds it: its signal and its renewal state."""

    __slots__ = (
        "body_over",
        "claimed",
        "freed",
        "last_landed_ms",
        "limit_lease",
        "lost",
        "lost_by",
        "next_renew_ms",
        "on_settling",
        "renewing",
        "signal",
        "slot",
        "stopped",
        "task",
    )

    def __init__(self, claimed: ClaimedJob, sent_ms: int, interval_ms: int) -> None:
        self.claimed = claimed
        self.signal = Signal()
        self.last_landed_ms = sent_ms
        self.next_renew_ms = sent_ms + interval_ms
        self.renewing: asyncio.Task[None] | None = None
        self.stopped = False
        self.lost = False
        self.lost_by: BaseException | None = None
        self.slot: FleetSlot | None = None
        self.limit_lease: LimitLease | None = None
        self.task: asyncio.Task[None] | None = None
        self.freed = False
        self.body_over = False
        self.on_settling: Callable[[HeldRun], None] | None = None

    def end_body(self) -> None:
        """The body's task has ended (its settle follows): a start mark would say nothing the
        settle does not (``claimed_run.Runner._mark_started``)."""
        self.body_over = True

    def stop(self) -> None:
        """No more renewals, and none on the wire is read: the settle is being sent. Tells
        ``on_settling`` once (the worker frees the run's pool slot there). Plain, not a
        coroutine: the settle calls it as its ``before_settle`` and awaits nothing."""
        self.stopped = True
        if self.on_settling is not None:
            callback, self.on_settling = self.on_settling, None
            callback(self)

    def lose(self, reason: BaseException) -> None:
        """The run is no longer ours: no more renewals, and its signal is aborted (the first
        reason wins on the signal — a drain may have come first — so ``lost_by`` keeps this
        one for the step guard)."""
        self.lost = True
        self.lost_by = reason
        self.signal.abort(reason)

    @property
    def renewable(self) -> bool:
        return not self.stopped and not self.lost

    def fields(self) -> dict[str, Any]:
        c = self.claimed
        return {
            "job": c.name,
            "job_id": c.id,
            "run_id": c.run_id,
            "queue": c.queue,
            "attempt": c.attempt,
            "worker_id": c.worker_id,
            "claim": c.claim,
        }


class Renewals:
    """Renews every held run that is due; reports what the renewals answer."""

    def __init__(
        self,
        *,
        driver: JobDriver,
        clock: Clock,
        held: Mapping[tuple[str, int], HeldRun],
        visibility_ms: int,
        interval_ms: int,
        metrics: JobMetrics,
    ) -> None:
        self.driver = driver
        self.leases: LeaseStore | None = driver.leases
        self.clock = clock
        self.held = held
        self.window_ms = visibility_ms
        self.interval_ms = interval_ms
        self.metrics = metrics

    def pass_once(self) -> list[asyncio.Task[None]]:
        """Check every window, send every due renewal; answers the renewals sent (not awaited:
        one hanging must not hold the others, nor the next window check)."""
        now = self.clock.now_ms()
        sent: list[asyncio.Task[None]] = []
        for run in list(self.held.values()):
            if not run.renewable:
                continue
            if now - run.last_landed_ms >= self.window_ms:
                self._lost(run, "window", now)
                continue
            if run.renewing is None and now >= run.next_renew_ms:
                run.next_renew_ms = now + self.interval_ms
                run.renewing = asyncio.ensure_future(self._renew(run, now))
                sent.append(run.renewing)
        return sent

    def lapsed(self, run: HeldRun) -> BaseException | None:
        """The guard before a step starts and before its result is saved: the run's window,
        checked NOW on this worker's clock rather than at the timer's next tick (a process
        frozen past its lease — SIGSTOP, a VM pause, a blocked loop — resumes with its
        timers overdue, and the body's may fire first). A lapsed window is reported and
        aborts the run exactly as the timer would (``jobs.lease.lost``, ``reason: window``);
        answers why the run is no longer ours, or None while it still is. A run being
        settled answers None: its step runner is closed by then."""
        if run.lost:
            return run.lost_by
        if run.stopped:
            return None
        now = self.clock.now_ms()
        if now - run.last_landed_ms >= self.window_ms:
            self._lost(run, "window", now)
            return run.lost_by
        return None

    def next_due_ms(self) -> int | None:
        """The earliest renewal or window end among the held runs."""
        due: int | None = None
        for run in self.held.values():
            if run.renewable:
                at = min(run.next_renew_ms, run.last_landed_ms + self.window_ms)
                due = at if due is None else min(due, at)
        return due

    async def _renew(self, run: HeldRun, sent_ms: int) -> None:
        try:
            await self._renew_row(run, sent_ms)
            if run.slot is not None and run.renewable:
                await self._renew_slot(run, run.slot)
        finally:
            run.renewing = None

    async def _renew_row(self, run: HeldRun, sent_ms: int) -> None:
        c = run.claimed
        try:
            answer = await self.driver.heartbeat(c.id, c.ref, self.window_ms)
        except Exception as exc:
            if run.renewable:
                self._failed(run, exc, "lease")
            return
        if not run.renewable:
            return  # settled (or already reported) while it was on the wire: not ours to read
        if answer == "renewed":
            run.last_landed_ms = max(run.last_landed_ms, sent_ms)
        elif answer == "cancelled":
            log.info("jobs.lease.cancelled", extra=run.fields())
            run.lose(
                LeaseLostError(
                    f"job {c.name!r} was cancelled while it ran; the attempt is stopped",
                    meta={"job": c.name, "job_id": c.id, "reason": "cancelled"},
                )
            )
        elif await store_lost(self.driver, c):
            # the loss is reported once for every row (ujobs.execution.store_loss)
            if run.renewable:
                self._lost(run, STORE_LOST_REASON, self.clock.now_ms(), level=logging.DEBUG)
        elif run.renewable:
            self._lost(run, "not-ours", self.clock.now_ms())

    async def _renew_slot(self, run: HeldRun, slot: FleetSlot) -> None:
        assert self.leases is not None
        try:
            kept = await self.leases.renew(slot.key, slot.holder, self.window_ms)
        except Exception as exc:
            if run.renewable:
                self._failed(run, exc, "slot")
            return
        if kept or not run.renewable:
            return
        c = run.claimed
        log.error("jobs.worker.slot-lost", extra={**run.fields(), "key": slot.key})
        run.lose(
            JobSlotLostError(
                f"job {c.name!r} lost its concurrency slot {slot.key!r} (it lapsed or was "
                "taken); the run is stopped so the cap holds",
                meta={"job": c.name, "job_id": c.id, "key": slot.key},
            )
        )

    def _failed(self, run: HeldRun, exc: Exception, what: str) -> None:
        now = self.clock.now_ms()
        elapsed = now - run.last_landed_ms
        if what == "lease" and elapsed >= self.window_ms:
            self._lost(run, "window", now)
            return
        log.warning(
            "jobs.heartbeat.failed",
            extra={
                **run.fields(),
                "renewing": what,
                "since_landed_ms": elapsed,
                "window_ms": self.window_ms,
                "error": f"{type(exc).__name__}: {exc}",
            },
        )

    def _lost(self, run: HeldRun, reason: str, now: int, *, level: int = logging.ERROR) -> None:
        c = run.claimed
        log.log(
            level,
            "jobs.lease.lost",
            extra={
                **run.fields(),
                "reason": reason,
                "since_landed_ms": now - run.last_landed_ms,
                "window_ms": self.window_ms,
            },
        )
        self.metrics.lease_lost(c.queue)
        run.lose(
            LeaseLostError(
                f"job {c.name!r} lost its lease ({reason}); the queue may hand it to another "
                "worker, so this attempt is stopped",
                meta={"job": c.name, "job_id": c.id, "reason": reason},
            )
        )


class HeartbeatTimer:
    """The one timer: renewals, plus the worker's registry row (``beat``) on its own cadence."""

    def __init__(
        self,
        *,
        renewals: Renewals,
        clock: Clock,
        interval_ms: int,
        beat_due: Callable[[int], int | None],
        beat: Callable[[], asyncio.Task[None] | None],
    ) -> None:
        self.renewals = renewals
        self.clock = clock
        self.interval_ms = interval_ms
        self._beat_due = beat_due
        self._beat = beat
        self._task: asyncio.Task[None] | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._stopped = False

    def tick(self) -> list[asyncio.Task[None]]:
        """One pass: every due renewal and, when due, the registry row; answers what it sent."""
        sent = self.renewals.pass_once()
        due = self._beat_due(self.clock.now_ms())
        if due is not None and due <= self.clock.now_ms():
            task = self._beat()
            if task is not None:
                sent.append(task)
        return sent

    def _delay_ms(self) -> int:
        now = self.clock.now_ms()
        at = now + self.interval_ms
        for due in (self.renewals.next_due_ms(), self._beat_due(now)):
            if due is not None:
                at = min(at, due)
        return max(1, at - now)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while not self._stopped:
            try:
                self.tick()
            except Exception as exc:
                log.error("jobs.heartbeat.tick-failed", extra={"error": repr(exc)})
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiter = waiter
            handle = loop.call_later(self._delay_ms() / 1000, _resolve, waiter)
            try:
                await waiter
            finally:
                handle.cancel()
                self._waiter = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        self._stopped = True
        if self._waiter is not None:
            _resolve(self._waiter)
        task = self._task
        if task is not None and not task.done():
            await asyncio.wait({task})


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
