"""``run.step``: durable steps that replay from storage.

A step's name is its replay key. A completed step answers its stored output without calling its
function again, so an attempt that fails at step 3 re-runs only step 3 on the next attempt, and
a side effect in step 1 happens once. Every write goes through ``driver.save_step``, fenced on
the claim: a worker whose lease lapsed cannot write into the run that replaced it.

Decisions worth knowing when writing a body:

* **A step answers its STORED form, on every path.** The value ``fn`` returns is written as
  JSON (orjson) and the step answers that JSON read back — on the first run as on a replay — so
  a body never sees a type on attempt 1 that attempt 2 cannot reproduce. A dataclass, a pydantic
  model, a ``datetime`` or a ``UUID`` comes back as a dict / ISO string / string; a value JSON
  cannot carry (a set, an object, a non-finite float, a dict with non-string keys) is
  ``X_STEP_OUTPUT_INVALID`` naming the step, never a silent loss at replay.
* **A sync ``fn`` runs on the event loop, not in a thread.** ``fn(signal)`` is called; if it
  answers an awaitable (an ``async def``, or a ``lambda signal: send(org)``), that is awaited.
  A plain function that blocks blocks the loop — and neither ``step_timeout`` nor the job's
  deadline can interrupt it. Use ``asyncio.to_thread`` inside ``fn`` for blocking work.
* **Names are unique in a run.** A name used twice — including a replayed name called again,
  and a step that failed and is called again inline — is ``X_STEP_DUPLICATE``. ``step.sleep``
  with no name is named from its duration (``'sleep:3d'``), so two equal unnamed sleeps in one
  run need names.
* **Suspension is control flow.** ``step.sleep`` and a waiting ``step.wait_for_event`` raise
  ``StepSuspension``, a ``BaseException`` so ``except Exception`` in a body does not swallow
  it. The step runner also remembers it: a body that catches it anyway is still suspended, and
  every later step call raises it again.
* **Past the attempt's abort, no NEW step starts** — checked before ``fn`` runs and again
  before its result is saved. The deadline, a lost lease or a cancel refuse every write
  (``X_ABORTED``): a body that ignores the signal can finish its code but cannot record
  anything in the run. A DRAIN (``X_DRAINING``) is gentler, because it never aborts a call
  already on the wire: a step that was running when the drain began may still finish and be
  saved, while a step not yet started is refused with ``X_DRAINING``. Once the attempt is
  settled (``close()``), nothing is written whatever the reason.
* **A lapsed lease is checked at the step, not at the heartbeat's next tick.** In a worker the
  runner asks the attempt's lease window (``lease_check``, on the worker's clock) before a
  step starts and before its result is saved, so a process frozen past its lease (SIGSTOP, a
  paused VM) that resumes mid-body starts no new step and saves nothing, even if its body's
  timer fires before the heartbeat's; the attempt is aborted there with
  ``X_JOB_LEASE_LOST``.
* **The stored steps are read on first use**, not when the attempt starts: a body that never
  calls a step costs no ``load_steps`` round trip.
* **A wait's start is stamped by the bus clock** and stored as its own record
  (``'<name>#wait-start'``), so it survives suspensions; the timeout is declared only after
  asking the bus clock again, so a worker whose clock runs ahead never gives up early.
  A timed-out wait raises ``X_JOB_TIMEOUT`` on the ordinary retry path; the next attempt
  looks for a matching event once more before timing out again.
"""

from __future__ import annotations

import asyncio
import inspect
import math
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from typing import Any, Literal, TypeVar, cast, overload

from ujobs.clock import Clock
from ujobs.context import current_tenant
from ujobs.drivers.base import ClaimRef, JobDriver, StepRecord
from ujobs.durations import duration_label, duration_ms
from ujobs.errors import (
    InvariantError,
    JobAbortedError,
    JobDrainedError,
    JobTimeoutError,
    LeaseLostError,
    StepDuplicateError,
    error_code_of,
)
from ujobs.events.bus import EventBus, event_bus
from ujobs.execution.child_step_api import ChildStepApi
from ujobs.execution.run import JSONValue, Match, StepFn
from ujobs.execution.step_output import copy_output as _copy
from ujobs.execution.step_output import stored_form
from ujobs.signal import Signal

R = TypeVar("R")

LeaseCheck = Callable[[], BaseException | None]
"""Asked before a step starts and before its result is saved: why the attempt no longer holds
its row (a lapsed lease window on the worker's clock), or None while it does. The worker's
check also aborts the attempt (``Renewals.lapsed``)."""

WAIT_START_SUFFIX = "#wait-start"
SLEEP_NAME_PREFIX = "sleep:"
MAX_STEP_NAME_LENGTH = 200


class StepSuspension(BaseException):
    """The run parks until ``resume_at_ms``; raised by ``step.sleep`` / ``wait_for_event``.

    A ``BaseException`` on purpose: it is not a failure, so ``except Exception`` must not turn
    it into one. It burns no attempt.
    """

    def __init__(self, step: str, resume_at_ms: int, kind: Literal["sleep", "wait"]) -> None:
        super().__init__(f"step {step!r} suspends the run until {resume_at_ms}")
        self.step = step
        self.resume_at_ms = resume_at_ms
        self.kind = kind


def _validate_name(name: Any) -> str:
    if not isinstance(name, str) or not name.strip() or len(name) > MAX_STEP_NAME_LENGTH:
        raise InvariantError(
            f"a step name must be a non-empty string of at most {MAX_STEP_NAME_LENGTH} "
            f"characters, got {name!r}; it is the replay key, so derive it deterministically",
        )
    if name.endswith(WAIT_START_SUFFIX):
        raise InvariantError(
            f"step name {name!r} ends with {WAIT_START_SUFFIX!r}, which the step runner reserves "
            "for the start of a wait_for_event",
            meta={"step": name},
        )
    return name


class Step(ChildStepApi):
    """One attempt's step runner (``run.step``); built by ``execute_job`` or a test by hand.

    ``stored`` is the run's completed steps (``driver.load_steps(run_id, tenant_id=...)``: a
    ``run_id`` is a namespace of the row's tenant, ``tenant_id``); None reads them
    on the first step call (once per attempt, shared by steps started together). ``signal`` is
    the ATTEMPT's signal: once it is aborted no new step starts.
    """

    def __init__(
        self,
        driver: JobDriver,
        job_id: str,
        run_id: str,
        tenant_id: str | None,
        ref: ClaimRef,
        stored: Sequence[StepRecord] | None,
        signal: Signal,
        clock: Clock,
        bus: EventBus | None = None,
        step_timeout_ms: int | None = None,
        event_poll_ms: int = 30_000,
        lease_check: LeaseCheck | None = None,
    ) -> None:
        """Keywords everywhere but ``execute_job``, which passes them in this order: a class
        called with a dozen keywords pays for a keyword dict and its unpacking every attempt."""
        self.driver = driver
        self.job_id = job_id
        self.run_id = run_id
        self.tenant_id = tenant_id
        self._ref = ref
        self._stored: dict[str, StepRecord] | None = (
            None if stored is None else {s.name: s for s in stored}
        )
        self._loading: asyncio.Task[list[StepRecord]] | None = None
        self._signal = signal
        self.clock = clock
        self._bus = bus
        self._step_timeout_ms = step_timeout_ms
        self.event_poll_ms = event_poll_ms
        self._lease_check = lease_check
        self._seen: set[str] = set()
        self._enqueues: dict[str, int] = {}
        self._closed: BaseException | Callable[[], BaseException] | None = None
        self.suspension: StepSuspension | None = None
        self.replayed: list[str] = []
        self.ran: list[str] = []

    @classmethod
    async def load(
        cls,
        *,
        driver: JobDriver,
        job_id: str,
        run_id: str,
        tenant_id: str | None,
        ref: ClaimRef,
        signal: Signal,
        clock: Clock,
        bus: EventBus | None = None,
        step_timeout_ms: int | None = None,
        event_poll_ms: int = 30_000,
        lease_check: LeaseCheck | None = None,
    ) -> Step:
        """A runner over the run's stored steps."""
        stored = await driver.load_steps(run_id, tenant_id=tenant_id)
        return cls(
            driver=driver,
            job_id=job_id,
            run_id=run_id,
            tenant_id=tenant_id,
            ref=ref,
            stored=stored,
            signal=signal,
            clock=clock,
            bus=bus,
            step_timeout_ms=step_timeout_ms,
            event_poll_ms=event_poll_ms,
            lease_check=lease_check,
        )

    @classmethod
    def lazy(
        cls,
        *,
        driver: JobDriver,
        job_id: str,
        run_id: str,
        tenant_id: str | None,
        ref: ClaimRef,
        signal: Signal,
        clock: Clock,
        bus: EventBus | None = None,
        step_timeout_ms: int | None = None,
        event_poll_ms: int = 30_000,
        lease_check: LeaseCheck | None = None,
    ) -> Step:
        """A runner that reads the stored steps on the first step call (what ``execute_job``
        builds: a body that never calls a step costs no ``load_steps``)."""
        return cls(
            driver=driver,
            job_id=job_id,
            run_id=run_id,
            tenant_id=tenant_id,
            ref=ref,
            stored=None,
            signal=signal,
            clock=clock,
            bus=bus,
            step_timeout_ms=step_timeout_ms,
            event_poll_ms=event_poll_ms,
            lease_check=lease_check,
        )

    async def records(self) -> dict[str, StepRecord]:
        """The run's stored steps, read once; concurrent first calls share the one read."""
        stored = self._stored
        if stored is not None:
            return stored
        if self._loading is None:
            loading = self.driver.load_steps(self.run_id, tenant_id=self.tenant_id)
            self._loading = asyncio.ensure_future(loading)
        loaded = await self._loading
        if self._stored is None:
            self._stored = {s.name: s for s in loaded}
        return self._stored

    def close(self, reason: BaseException | Callable[[], BaseException]) -> None:
        """The attempt is settled: every later step call is refused (an abandoned body).

        ``reason`` may be a zero-argument callable building it: the executor closes every
        attempt's runner, and almost no body calls a step after its settle, so the error is
        built only when one does."""
        if self._closed is None:
            self._closed = reason

    # -- guards --------------------------------------------------------------------------
    def enter(self, name: Any) -> str:
        """Validate, refuse a duplicate, re-raise a pending suspension."""
        checked = _validate_name(name)
        if self.suspension is not None:
            raise self.suspension
        if checked in self._seen:
            raise StepDuplicateError(
                f"step {checked!r} is used twice in one run; step names are the replay key, so "
                "each must be unique (add the loop index or the row id to the name)",
                meta={"step": checked},
            )
        self._seen.add(checked)
        return checked

    def ensure_writable(self, name: str, *, started: bool = False) -> None:
        """Refuse a write past the attempt's abort or its settle.

        ``started=False`` guards a step about to begin: any abort refuses it — ``X_DRAINING``
        under a drain (a call not yet sent is stopped), ``X_ABORTED`` otherwise.
        ``started=True`` guards the save of a step that was already running: under a drain it
        may land (a drain never aborts a call on the wire); past the deadline, a lost lease,
        a cancel or the settle it is ``X_ABORTED``. A lapsed lease (``lease_check``) refuses
        both, drain or not: the row may already be another worker's.
        """
        closed = self._closed
        if closed is not None and not isinstance(closed, BaseException):
            closed = self._closed = closed()
        reason = closed
        if reason is None and self._lease_check is not None:
            # Ahead of the signal: a lapsed lease refuses even a started step under a drain.
            reason = self._lease_check()
        if reason is None and self._signal.reason is not None:
            reason = self._signal.reason
            if error_code_of(reason) == JobDrainedError.code:
                if started:
                    return
                raise JobDrainedError(
                    f"step {name!r} was not started: the worker is draining; the attempt is "
                    "handed back uncounted and the step runs on the next claim",
                    meta={"step": name, "reason": JobDrainedError.code},
                ) from reason
        if reason is None:
            return
        code = error_code_of(reason) or type(reason).__name__
        err = JobAbortedError(
            f"step {name!r} cannot be written: the attempt was aborted ({code})",
            meta={"step": name, "reason": code},
        )
        raise err from reason

    async def save(
        self, name: str, output: JSONValue, started_at_ms: int, *, started: bool = False
    ) -> None:
        self.ensure_writable(name, started=started)
        ok = await self.driver.save_step(
            self.job_id, self._ref, self.run_id, name, output, started_at_ms=started_at_ms
        )
        if not ok:
            raise LeaseLostError(
                f"step {name!r} was not saved: this worker no longer holds the job's claim "
                "(its lease lapsed and the queue re-delivered it, or it was cancelled)",
                meta={"step": name, "job_id": self.job_id},
            )
        stored = await self.records()
        stored[name] = StepRecord(
            name=name,
            output=output,
            seq=len(stored),
            started_at_ms=started_at_ms,
            finished_at_ms=self.clock.now_ms(),
        )

    def suspend(self, name: str, resume_at_ms: int) -> StepSuspension:
        """A wait's suspension, remembered (``child_steps``)."""
        return self._suspension(name, resume_at_ms, "wait")

    def _suspension(
        self, name: str, resume_at_ms: int, kind: Literal["sleep", "wait"]
    ) -> StepSuspension:
        """Remember the suspension (a body that swallows it is still suspended); raise it."""
        self.suspension = StepSuspension(name, resume_at_ms, kind)
        return self.suspension

    # -- step.run ------------------------------------------------------------------------
    @overload
    async def run(self, name: str, fn: Callable[[Signal], Awaitable[R]]) -> R: ...
    @overload
    async def run(self, name: str, fn: Callable[[Signal], R]) -> R: ...
    async def run(self, name: str, fn: StepFn[R]) -> R:
        """Run ``fn(signal)`` once ever; answers its stored (JSON) form, replayed or new."""
        checked = self.enter(name)
        record = (await self.records()).get(checked)
        if record is not None:
            self.replayed.append(checked)
            return cast(R, _copy(record.output))
        if not callable(fn):
            raise InvariantError(f"step {checked!r}: fn must be a function of the signal")
        self.ensure_writable(checked)
        started = self.clock.now_ms()
        result = await self._call(checked, fn)
        output = stored_form(checked, result)
        await self.save(checked, output, started, started=True)
        self.ran.append(checked)
        return cast(R, _copy(output))

    async def _call(self, name: str, fn: StepFn[Any]) -> Any:
        step_signal = Signal.any(self._signal)
        timeout_ms = self._step_timeout_ms
        answer = fn(step_signal)
        if not inspect.isawaitable(answer):
            return answer
        if timeout_ms is None:
            return await answer
        return await self._bounded(name, answer, step_signal, timeout_ms)

    async def _bounded(
        self, name: str, answer: Awaitable[Any], step_signal: Signal, timeout_ms: int
    ) -> Any:
        """``step_timeout``: abort the step's signal, cancel it, fail it with X_JOB_TIMEOUT.

        A step that swallows the cancel is not waited for: the step fails at its ceiling and
        whatever it does afterwards cannot be saved (its name is spent in this run).
        """
        loop = asyncio.get_running_loop()
        inner: asyncio.Future[Any] = asyncio.ensure_future(answer)
        ceiling: asyncio.Future[None] = loop.create_future()
        error = JobTimeoutError(
            f"step {name!r} exceeded its step_timeout of {timeout_ms} ms",
            meta={"step": name, "timeoutMs": timeout_ms},
        )

        def on_ceiling() -> None:
            step_signal.abort(error)
            inner.cancel()
            if not ceiling.done():
                ceiling.set_result(None)

        timer = loop.call_later(timeout_ms / 1000, on_ceiling)
        try:
            await asyncio.wait({inner, ceiling}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            inner.cancel()
            raise
        finally:
            timer.cancel()
        if inner.done() and not inner.cancelled():
            return inner.result()
        inner.add_done_callback(_consume)
        raise error

    # -- step.sleep ----------------------------------------------------------------------
    async def sleep(
        self, name_or_duration: str | int | timedelta, duration: str | int | timedelta | None = None
    ) -> None:
        """Suspend until the wake time; the replay after waking passes straight through.

        ``sleep('3d')`` is named ``'sleep:3d'``; ``sleep('nap', '3d')`` is named ``'nap'``.
        """
        if duration is None:
            ms = duration_ms(name_or_duration, field="step.sleep duration")
            name: Any = f"{SLEEP_NAME_PREFIX}{duration_label(ms)}"
        else:
            name = name_or_duration
            ms = duration_ms(duration, field="step.sleep duration")
        checked = self.enter(name)
        record = (await self.records()).get(checked)
        if record is not None:
            self.replayed.append(checked)
            wake = record.output.get("wakeAtMs") if isinstance(record.output, dict) else None
            early = isinstance(wake, int) and self.clock.now_ms() < wake
            if early and isinstance(wake, int):
                # Woken early (a clock behind the one that parked it): park again.
                raise self._suspension(checked, wake, "sleep")
            return
        self.ensure_writable(checked)
        now = self.clock.now_ms()
        wake_at = now + ms
        await self.save(checked, {"wakeAtMs": wake_at}, now)
        self.ran.append(checked)
        raise self._suspension(checked, wake_at, "sleep")

    # -- step.wait_for_event -------------------------------------------------------------
    async def wait_for_event(
        self,
        name: str,
        event: str,
        *,
        match: Match | None = None,
        timeout: str | int | timedelta | None = None,
    ) -> JSONValue:
        """Answer the payload of the first ``event`` published since the wait began that
        matches; park between polls; ``X_JOB_TIMEOUT`` once the BUS clock passes the timeout."""
        checked = self.enter(name)
        if not isinstance(event, str) or not event:
            raise InvariantError(f"step {checked!r}: the event name must be a non-empty string")
        timeout_ms = (
            None if timeout is None else duration_ms(timeout, field="wait_for_event timeout")
        )
        record = (await self.records()).get(checked)
        if record is not None:
            self.replayed.append(checked)
            return _copy(record.output)
        bus = self._bus if self._bus is not None else event_bus()
        started, began_at_ms = await self._wait_start(checked, event, bus)
        # The waiter's tenant is its job's: the scope the attempt runs under (``job_scope``).
        found = await bus.find(event, since_ms=started, match=match, tenant=current_tenant())
        if found is not None:
            # The wait had begun: under a drain its answer still lands.
            await self.save(checked, found.payload, began_at_ms, started=True)
            self.ran.append(checked)
            return _copy(found.payload)
        remaining: float = math.inf
        if timeout_ms is not None:
            bus_now = await bus.now()  # asked AGAIN: the bus clock alone decides a timeout
            if bus_now >= started + timeout_ms:
                raise JobTimeoutError(
                    f"step {checked!r} waited {timeout_ms} ms for event {event!r} and none matched",
                    meta={"step": checked, "event": event, "timeoutMs": timeout_ms},
                )
            remaining = started + timeout_ms - bus_now
        self.ensure_writable(checked)
        park = int(min(self.event_poll_ms, remaining))
        raise self._suspension(checked, self.clock.now_ms() + park, "wait")

    async def _wait_start(self, name: str, event: str, bus: EventBus) -> tuple[int, int]:
        """The wait's start on the BUS clock, stamped once and stored so it survives parking;
        and when it began on this worker's clock (the step record's ``started_at_ms``, which
        every other step stamps from the worker clock too)."""
        marker = f"{name}{WAIT_START_SUFFIX}"
        record = (await self.records()).get(marker)
        if record is not None and isinstance(record.output, dict):
            started = record.output.get("startedAtMs")
            if isinstance(started, int) and not isinstance(started, bool):
                return started, record.started_at_ms
        self.ensure_writable(name)
        started = await bus.now()
        began = self.clock.now_ms()
        await self.save(marker, {"startedAtMs": started, "event": event}, began)
        return started, began


def _consume(future: asyncio.Future[Any]) -> None:
    """Retrieve an abandoned future's outcome so asyncio does not report it as unretrieved."""
    if not future.cancelled():
        future.exception()


__all__ = ["Step", "StepSuspension", "stored_form"]
