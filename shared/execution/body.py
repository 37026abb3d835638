"""The body of one attempt as a task: the deadline, the worker's signal, abandonment.

``execute_job`` owns the verdict and the settle; this module only runs the body and reports how
its task ended. The deadline and any non-drain abort of the worker's signal abort ``run.signal``
AND cancel the task; a task that has not ended ``ABANDON_GRACE_MS`` later is abandoned (the
attempt is settled without it) and logged ``jobs.timeout.abandoned`` whenever it finally ends.
A drain (``X_DRAINING``) only signals: the body may still finish.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from ujobs.drivers.base import ClaimedJob
from ujobs.errors import JobAbortedError, JobDrainedError, JobTimeoutError, error_code_of
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
    """The mutable state of one attempt: its signal, its task, what halted it."""

    def __init__(
        self,
        claimed: ClaimedJob,
        handle: JobHandle[Any],
        *,
        grace_ms: int,
    ) -> None:
        self.claimed = claimed
        self.handle = handle
        self.grace_ms = grace_ms
        self.signal = Signal()
        self.task: asyncio.Task[Any] | None = None
        self.halt: asyncio.Future[None] | None = None
        self.halted_by: BaseException | None = None
        self.settled_at: float | None = None
        self.on_running: Callable[[], None] | None = None
        self.on_end: Callable[[], None] | None = None

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
        if self.halted_by is None:
            self.halted_by = reason
        if self.task is not None and not self.task.done():
            self.task.cancel()
        if self.halt is not None and not self.halt.done():
            self.halt.set_result(None)

    # -- running it ------------------------------------------------------------------------
    async def run_body(self, run: Run[Any], step: Step) -> BodyEnd:
        loop = asyncio.get_running_loop()
        self.halt = loop.create_future()
        task = asyncio.create_task(
            self.handle.run(run), name=f"ujobs:{self.claimed.name}:{self.claimed.id}"
        )
        self.task = task
        if self.on_running is not None:
            loop.call_soon(self._check_running, task)
        timeout_ms = self.handle.definition.timeout_ms
        timer = (
            loop.call_later(timeout_ms / 1000, self.on_deadline, timeout_ms)
            if timeout_ms is not None
            else None
        )
        halt = self.halt
        # One future for "the body ended or was halted" (cheaper than asyncio.wait per run).
        task.add_done_callback(self._body_done)
        try:
            await halt
            if not task.done():
                await asyncio.wait({task}, timeout=self.grace_ms / 1000)
        except asyncio.CancelledError:
            task.cancel()
            raise
        finally:
            if timer is not None:
                timer.cancel()
        if not task.done():
            task.add_done_callback(self._finished_late)
            return BodyEnd("abandoned", suspension=step.suspension)
        if self.halted_by is not None and not task.cancelled():
            # Halted, and it ended by something other than the cancel: it swallowed it.
            outcome = "raised" if task.exception() is not None else "returned"
            if outcome == "returned" or isinstance(task.exception(), StepSuspension):
                self._log_abandoned(outcome, late=False)
        if task.cancelled():
            return BodyEnd("raised", error=asyncio.CancelledError(), suspension=step.suspension)
        error = task.exception()
        if error is None:
            if step.suspension is not None:
                return BodyEnd("suspended", suspension=step.suspension)
            return BodyEnd("returned", result=task.result())
        if isinstance(error, StepSuspension) or step.suspension is not None:
            return BodyEnd("suspended", suspension=step.suspension or _as_suspension(error))
        return BodyEnd("raised", error=error)

    def _check_running(self, task: asyncio.Task[Any]) -> None:
        """Right after the body's first step: ``on_running`` when it is still going."""
        if not task.done() and self.on_running is not None:
            self.on_running()

    def _body_done(self, _: asyncio.Task[Any]) -> None:
        if self.halt is not None:
            _resolve(self.halt)
        if self.on_end is not None:
            self.on_end()

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


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
