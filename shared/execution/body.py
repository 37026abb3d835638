"""The body of one attempt: the deadline, the worker's signal, abandonment.

``execute_job`` owns the verdict and the settle; this module only runs the body and reports how
it ended. The body runs in the run's own task (``ujobs.execution.inline_body``: no task per
body). The deadline and any non-drain abort of the worker's signal abort ``run.signal`` AND
cancel that task, which throws ``CancelledError`` into the body; a body that has not ended
``ABANDON_GRACE_MS`` later is abandoned (handed to a task of its own, the attempt settled
without it) and logged ``jobs.timeout.abandoned`` whenever it finally ends. A drain
(``X_DRAINING``) only signals: the body may still finish. A run cancelled from outside (the
drain's deadline) ends at once, as cancelled, whether or not its body honours the cancel.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from ujobs.drivers.base import ClaimedJob
from ujobs.errors import JobAbortedError, JobDrainedError, JobTimeoutError, error_code_of
from ujobs.execution.inline_body import DETACHED, Inline
from ujobs.execution.run import Run
from ujobs.execution.steps import Step, StepSuspension
from ujobs.jobs.job import JobHandle
from ujobs.signal import Signal

log = logging.getLogger("ujobs.jobs")

ABANDON_GRACE_MS = 100
"""How long a halted body gets to unwind after its task is cancelled before it is abandoned.
A body that honours the cancel unwinds within one turn of the loop; this only bounds one that
swallowed it (or cleans up at length in ``finally``)."""


@dataclass(slots=True)
class BodyEnd:
    """How the body's task ended, before any verdict."""

    kind: Literal["returned", "raised", "suspended", "abandoned"]
    result: Any = None
    error: BaseException | None = None
    suspension: StepSuspension | None = None


class Attempt:
    """The mutable state of one attempt: its signal, its body, what halted it."""

    def __init__(
        self,
        claimed: ClaimedJob,
        handle: JobHandle[Any],
        grace_ms: int,
    ) -> None:
        self.claimed = claimed
        self.handle = handle
        self.grace_ms = grace_ms
        self.signal = Signal()
        self.task: asyncio.Task[Any] | None = None
        """The run's task, which drives the body (``ujobs.execution.inline_body``)."""
        self.body: Inline | None = None
        self.halted_by: BaseException | None = None
        self.settled_at: float | None = None
        self.on_running: Callable[[], None] | None = None
        self.on_end: Callable[[], None] | None = None
        self._cancels = 0  # the cancels of the run's task that were this attempt's halts
        self._grace: asyncio.TimerHandle | None = None
        self._ended = False

    # -- what stops the body --------------------------------------------------------------
    def on_external(self, reason: BaseException) -> None:
        """The worker's signal: a drain only signals; anything else halts the body too."""
        self.signal.abort(reason)
        if error_code_of(reason) != JobDrainedError.code:
            self.stop_body(reason)

    def on_deadline(self, timeout_ms: int) -> None:
        reason = JobTimeoutError(
            f"job {self.claimed.name!r} exceeded its timeout of {timeout_ms} ms",
            meta={"job": self.claimed.name, "timeoutMs": timeout_ms},
        )
        self.signal.abort(reason)
        self.stop_body(reason)

    def stop_body(self, reason: BaseException) -> None:
        """Halt the body: its run's task is cancelled (the body sees ``CancelledError``), and a
        body still going ``grace_ms`` later is abandoned. Until the body first waits, only
        noted (``run_body`` applies it then)."""
        if self.halted_by is None:
            self.halted_by = reason
        self._cancel_body()

    def _cancel_body(self) -> None:
        task = self.task
        if self.body is None or task is None or self._ended or self._grace is not None:
            return
        self._cancels += 1
        task.cancel()
        self._grace = asyncio.get_running_loop().call_later(self.grace_ms / 1000, self._abandon)

    def _abandon(self) -> None:
        if self.body is not None and not self._ended:
            self.body.detach()

    def _cancel_kept(self) -> bool:
        """The body swallowed a cancel: detach it at once when the run's task was cancelled
        from outside too (the drain's deadline ends the run, not the body); after a halt of
        this attempt's own it gets ``grace_ms``."""
        task = self.task
        return task is not None and task.cancelling() > self._cancels

    def _uncancel(self) -> bool:
        """Take this attempt's own cancels back off the run's task; answers whether a cancel
        from outside is left (the run must end as cancelled)."""
        task = self.task
        if task is None:
            return False
        for _ in range(self._cancels):
            task.uncancel()
        self._cancels = 0
        return task.cancelling() > 0

    # -- running it ------------------------------------------------------------------------
    async def run_body(self, run: Run[Any], step: Step) -> BodyEnd:
        """Run the body to its end. Its first step runs here, synchronously: a body that ends
        there (it never waits) needs no ``Inline``, no hooks and no deadline timer, since no
        timer can fire before it waits. One that waits is handed to an ``Inline`` from where it
        stands, the deadline armed from the body's start, and a halt that came during that
        first step (``stop_body`` only notes one before there is a body to cancel) is applied
        before it waits."""
        task = self.task = asyncio.current_task()
        timeout_ms = self.handle.definition.timeout_ms
        loop = asyncio.get_running_loop()
        started = loop.time() if timeout_ms is not None else 0.0  # no clock read without one
        body: Inline | None = None
        timer: asyncio.TimerHandle | None = None
        result: Any = None
        error: BaseException | None = None
        try:
            try:
                # Inside the try: a body whose signature does not take the run raises here,
                # and that is the attempt's failure like any other.
                coro = self.handle.start(run)
                first = coro.send(None)
            except StopIteration as stop:
                result = stop.value
            else:
                body = Inline(coro, first)
                body.on_first_wait = self.on_running
                body.on_cancel_kept = self._cancel_kept
                self.body = body
                if timeout_ms is not None:
                    timer = loop.call_at(started + timeout_ms / 1000, self.on_deadline, timeout_ms)
                if self.halted_by is not None:
                    self._cancel_body()
                result = await body
        except BaseException as exc:
            error = exc
        finally:
            self._ended = True
            if body is not None:
                body.on_first_wait = body.on_cancel_kept = None  # no cycle back to this attempt
            if timer is not None:
                timer.cancel()
            if self._grace is not None:
                self._grace.cancel()
            if self.on_end is not None:
                self.on_end()
        # Nothing to take back, nothing from outside: the common case asks the task once.
        if (self._cancels or (task is not None and task.cancelling())) and self._uncancel():
            raise asyncio.CancelledError()  # the run was cancelled from outside: no settle
        if isinstance(error, KeyboardInterrupt | SystemExit):
            raise error  # the process's, never a job's verdict (as a task re-raises them)
        if result is DETACHED:
            assert body is not None
            assert body.detached is not None
            body.detached.add_done_callback(self._finished_late)
            return BodyEnd("abandoned", suspension=step.suspension)
        cancelled = isinstance(error, asyncio.CancelledError)
        if (
            self.halted_by is not None
            and not cancelled
            and (error is None or isinstance(error, StepSuspension))
        ):
            # Halted, and it ended by something other than the cancel: it swallowed it.
            self._log_abandoned("raised" if error is not None else "returned", late=False)
        if cancelled:
            return BodyEnd("raised", error=asyncio.CancelledError(), suspension=step.suspension)
        if error is None:
            if step.suspension is not None:
                return BodyEnd("suspended", suspension=step.suspension)
            return BodyEnd("returned", result)
        if isinstance(error, StepSuspension) or step.suspension is not None:
            return BodyEnd("suspended", suspension=step.suspension or _as_suspension(error))
        return BodyEnd("raised", error=error)

    def _finished_late(self, task: asyncio.Task[Any]) -> None:
        if task.cancelled():
            ended = "cancelled"
        elif task.exception() is not None:
            ended = "raised"
        else:
            ended = "returned"
        self._log_abandoned(ended, late=True)

    def _log_abandoned(self, ended: str, *, late: bool) -> None:
        reason = self.halted_by
        log.warning(
            "jobs.timeout.abandoned",
            extra={
                "job": self.claimed.name,
                "job_id": self.claimed.id,
                "run_id": self.claimed.run_id,
                "queue": self.claimed.queue,
                "attempt": self.claimed.attempt,
                "reason": error_code_of(reason) if reason is not None else None,
                "ended": ended,
                "after_settle": late,
            },
        )


def _as_suspension(error: BaseException) -> StepSuspension:
    assert isinstance(error, StepSuspension)
    return error


def verdict_error(attempt: Attempt, end: BodyEnd) -> BaseException:
    """The failure to record: the signal's reason once it is aborted, else what was thrown."""
    if attempt.signal.aborted and attempt.signal.reason is not None:
        return attempt.signal.reason
    if end.error is None or isinstance(end.error, asyncio.CancelledError):
        return JobAbortedError(
            f"job {attempt.claimed.name!r}: the body was cancelled by something other than "
            "the executor",
            meta={"job": attempt.claimed.name},
        )
    return end.error
