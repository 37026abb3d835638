"""``execute_job``: ONE attempt of one claimed job, from the stored input to the settled row.

The worker (``ujobs.worker.claimed_run``) calls it once per claimed row it runs, with its own
abort signal (a drain, a lost lease) and ``before_settle`` (it stops the row's heartbeat there);
``ujobs.testing.drain`` calls it the same way, one row at a time. It never raises for the
body's errors: it answers a ``JobExecution`` (``ujobs.execution.outcome``).

What one attempt does, in order:

1. Parse the stored input under the job's schema and derive its tenant. A failure there fails
   the attempt without running the body (``X_JOB_INPUT_UNPARSEABLE`` on the ordinary retry path;
   its final dead-letter tells ``on_settled`` ``input=None``).
2. Install the job's scope (``ujobs.execution.scope``): an actor whose ``org_id`` is the declared
   tenant (none for ``tenant='none'``), and the job's span — a child of the row's
   ``traceparent`` (``ujobs.tracing``); build ``ctx``.
3. Build the step runner (it reads the run's stored steps on the body's first step call, so a
   body that never calls a step costs no round trip), the ``Run``, and start the body as a task.
4. Wait for it, bounded by the job's ``timeout``. The deadline aborts ``run.signal`` with
   ``X_JOB_TIMEOUT`` AND cancels the body's task, so the body stops at its next ``await``.
5. Read the verdict (below), flush the last progress, refuse further step writes, await
   ``before_settle`` (the worker stops its heartbeat there — the ack/nack is on the wire next),
   and settle. Only a settle that landed tells ``on_settled``, and only for an ending.

When the store is away (``ujobs.execution.outage``): a settle that fails with
``X_DRIVER_UNREACHABLE`` is sent again while ``lease_left()`` says the row is still ours, and
an attempt that failed with it (a step could not load or save) is ``interrupted`` — handed back
uncounted, due now — unless the row was handed back that way ``MAX_UNREACHABLE_RETURNS``
times already, in which case the nack is refused and the ordinary verdict is sent instead.

The external ``signal`` (the worker's) composes with the deadline:

* ``X_DRAINING`` (a drain) only SIGNALS: the body may finish (``completed``); if it unwinds
  instead — with any error — the attempt is ``interrupted``: handed back uncounted, due now.
* Any other reason (``X_JOB_LEASE_LOST`` from the heartbeat — a lapsed lease or a cancel — or
  ``X_JOB_SLOT_LOST``) is treated like the deadline: the signal is aborted AND the body's task
  cancelled, because the row is no longer ours and a body still running is a second copy. The
  settle is still sent (the fence answers False if another claim owns the row:
  ``jobs.settle.unowned``).

A body that swallows the cancel or blocks is abandoned ``ABANDON_GRACE_MS`` after it (the attempt
is settled without waiting); if it finishes later it is logged ``jobs.timeout.abandoned`` — the
one way to find a handler that never reads ``run.signal``. Its later step writes are refused
(``X_ABORTED``) and its progress is dropped.

The objects an attempt builds (its step runner, its ``Run``, its ``JobExecution``) are built
with positional arguments, each commented with the field it fills: a class called with a dozen
keywords pays for a keyword dict and its unpacking on every call, the largest part of what an
attempt cost beyond its body.

The verdict is read off the signal, not off the error: once the attempt's signal is aborted, the
failure recorded is the signal's reason, whatever the body unwound with. A body that returns
normally after a drain signal completed; a halted body (deadline, lost lease) fails even if it
returned, because its result arrived after the attempt was given up.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from functools import partial
from typing import Any, cast

from ujobs.clock import Clock
from ujobs.drivers.base import ClaimedJob, JobDriver, NackOptions
from ujobs.errors import (
    JobAbortedError,
    JobDrainedError,
    JobSnoozeLimitError,
    LeaseLostError,
    UltimateError,
    error_code_of,
)
from ujobs.events.bus import EventBus
from ujobs.execution.body import ABANDON_GRACE_MS, Attempt, BodyEnd, verdict_error
from ujobs.execution.on_settled import ON_SETTLED_ATTEMPTS, announce_exhausted, tell_settled
from ujobs.execution.outage import MAX_UNREACHABLE_RETURNS, LeaseLeft, unreachable_failure
from ujobs.execution.outcome import OUTCOMES, ExecutionOutcome, JobExecution, JobOutcome
from ujobs.execution.progress import ProgressReporter
from ujobs.execution.run import Run, Settled, SettledOutcome
from ujobs.execution.scope import AttemptScope, ContextSpec, build_ctx, parse_stored
from ujobs.execution.settle import (
    BeforeSettle,
    FailureVerdict,
    decide_failure,
    hand_back,
    outage_verdict,
    refuse_job,
    settle_answer,
)
from ujobs.execution.steps import LeaseCheck, Step
from ujobs.execution.store_loss import store_lost
from ujobs.jobs.job import JobHandle
from ujobs.jobs.retry import StopReason, is_final_attempt
from ujobs.jobs.snooze import MAX_SNOOZES, Snooze
from ujobs.results import encode_result
from ujobs.signal import Signal

log = logging.getLogger("ujobs.jobs")

__all__ = [
    "ABANDON_GRACE_MS",
    "ON_SETTLED_ATTEMPTS",
    "ExecutionOutcome",
    "JobExecution",
    "JobOutcome",
    "announce_exhausted",
    "execute_job",
    "hand_back",
    "refuse_job",
]


async def execute_job(
    claimed: ClaimedJob,
    *,
    driver: JobDriver,
    handle: JobHandle[Any],
    context: ContextSpec,
    clock: Clock | None = None,
    events: EventBus | None = None,
    signal: Signal | None = None,
    before_settle: BeforeSettle | None = None,
    abandon_grace_ms: int = ABANDON_GRACE_MS,
    rng: random.Random | None = None,
    failure: BaseException | None = None,
    lease_left: LeaseLeft | None = None,
    lease_check: LeaseCheck | None = None,
    body_running: Callable[[], None] | None = None,
    body_ended: Callable[[], None] | None = None,
) -> JobExecution:
    """Run one attempt of ``claimed`` and settle it; answers what happened (never raises for
    the body's errors — only a cancellation of the caller propagates).

    ``context`` is the app's ctx (a value, or a zero-arg callable called inside the job's
    scope); ``clock`` defaults to the driver's; ``events`` to the process's bus; ``signal`` is
    the worker's (drain, lost lease); ``before_settle`` is awaited right before the ack/nack
    is sent; ``rng`` seeds the retry jitter (tests). ``failure`` fails the attempt without
    running the body, on the ordinary retry path — the worker passes what went wrong deciding
    the run's concurrency key (``key(input)`` threw), which must never fail the claim round.
    ``lease_left`` answers how much of the row's lease the worker still holds (the heartbeat's
    window); a settle the store could not take is sent again within it (default: the claim's
    own lease; ``ujobs.execution.outage``). ``lease_check`` is asked before the body starts,
    before each step starts and before a step's result is saved (the worker's: the lease
    window on its clock, which aborts ``signal`` when lapsed); none outside a worker.
    ``body_running`` is called once the body's first step has run and it has not ended (a
    body that ends in its first step never calls it), ``body_ended`` as the body's task ends,
    before its settle: the worker's start mark of a row claimed ahead goes only to a body
    still running a while after it began.
    """
    clock = clock or driver.clock
    started_ms = clock.now_ms()
    attempt = Attempt(claimed, handle, abandon_grace_ms)
    attempt.on_running = body_running
    attempt.on_end = body_ended
    unsubscribe = signal.on_abort(attempt.on_external) if signal is not None else None
    parsed = parse_stored(handle, claimed.input, stored_tenant=claimed.tenant_id)
    ref = claimed.ref
    try:
        with AttemptScope(claimed, parsed.tenant):
            ctx: Any = None
            failure = parsed.error or failure
            try:
                ctx = build_ctx(context)
            except Exception as exc:
                failure = failure or exc
            step: Step | None = None
            progress = ProgressReporter(driver.introspect, claimed.id, ref, clock)
            end: BodyEnd
            lapsed = lease_check() if lease_check is not None else None
            if lapsed is not None:
                # Held past its lease before the body started (a buffered row, a frozen
                # process): the row may be another worker's by now, so the body never runs.
                attempt.stop_body(lapsed)
                failure = failure or lapsed
            if failure is None and not attempt.signal.aborted:
                # Lazy (``stored=None``, as ``Step.lazy`` builds it): the stored steps are read
                # on the body's first step call.
                definition = handle.definition
                step = Step(  # positional, in the signature's order (see Step.__init__)
                    driver,  # driver
                    claimed.id,  # job_id
                    claimed.run_id,  # run_id
                    claimed.tenant_id,  # tenant_id
                    ref,  # ref
                    None,  # stored
                    attempt.signal,  # signal
                    clock,  # clock
                    events,  # bus
                    definition.step_timeout_ms,  # step_timeout_ms
                    definition.event_poll_ms,  # event_poll_ms
                    lease_check,  # lease_check
                )
            if failure is not None:
                end = BodyEnd("raised", error=failure)
            elif step is None or attempt.signal.aborted:
                # Drained or halted before the body started: it never runs.
                end = BodyEnd("raised", error=attempt.signal.reason)
            else:
                run: Run[Any] = Run(  # positional, in field order (the module's docstring)
                    parsed.value,  # input
                    step,  # step
                    ctx,  # ctx
                    claimed.attempt,  # attempt
                    is_final_attempt(handle.retry, claimed.attempt),  # final_attempt
                    claimed.id,  # job_id
                    claimed.run_id,  # run_id
                    attempt.signal,  # signal
                    progress,  # progress
                    claimed.name,  # name
                    claimed.queue,  # queue
                    parsed.tenant,  # tenant_id
                )
                end = await attempt.run_body(run, step)
            return await _settle(
                attempt,
                end,
                driver=driver,
                clock=clock,
                started_ms=started_ms,
                step=step,
                progress=progress,
                before_settle=before_settle,
                parsed_input=parsed.value if parsed.ok else None,
                tenant=parsed.tenant,
                ctx=ctx,
                rng=rng,
                lease_left=lease_left,
            )
    finally:
        if unsubscribe is not None:
            unsubscribe()


async def _settle(
    attempt: Attempt,
    end: BodyEnd,
    *,
    driver: JobDriver,
    clock: Clock,
    started_ms: int,
    step: Step | None,
    progress: ProgressReporter,
    before_settle: BeforeSettle | None,
    parsed_input: Any,
    tenant: str | None,
    ctx: Any,
    rng: random.Random | None,
    lease_left: LeaseLeft | None,
) -> JobExecution:
    claimed, handle = attempt.claimed, attempt.handle
    now = clock.now_ms()
    duration = max(0, now - started_ms)
    outcome: ExecutionOutcome
    stop: StopReason | None = None
    error: BaseException | None = None
    resume_at: int | None = None
    nack: NackOptions | None
    fallback: FailureVerdict | None = None
    exhausted: BaseException | None = None
    halted = attempt.halted_by is not None
    stored_result: str | None = None
    if end.kind == "returned" and not halted:
        try:
            stored_result = encode_result(claimed.name, end.result, schema=handle.definition.output)
        except UltimateError as exc:
            # Too large or not JSON: refused (terminal), never truncated; the value is not
            # logged, only its size and the limit (ujobs.results).
            end = BodyEnd("raised", error=exc)
    snoozed = end.kind == "raised" and not halted and isinstance(end.error, Snooze)
    if snoozed and claimed.snoozes >= MAX_SNOOZES:
        end = BodyEnd("raised", error=_snooze_limit(claimed, cast(Snooze, end.error)))
    if end.kind == "raised" and not halted and isinstance(end.error, Snooze):
        outcome = "snoozed"
        resume_at = now + end.error.delay_ms
        nack = NackOptions(count=False, run_at_ms=resume_at, snooze=True)
        log.info(
            "jobs.attempt.snoozed",
            extra={
                "job": claimed.name,
                "job_id": claimed.id,
                "run_id": claimed.run_id,
                "queue": claimed.queue,
                "attempt": claimed.attempt,
                "snoozes": claimed.snoozes + 1,
                "retry_in_ms": end.error.delay_ms,
            },
        )
    elif end.kind == "returned" and not halted:
        outcome, nack = "completed", None
    elif end.kind == "suspended" and not halted and end.suspension is not None:
        outcome = "suspended"
        resume_at = end.suspension.resume_at_ms
        nack = NackOptions(park=True, count=False, run_at_ms=resume_at)
    else:
        error = verdict_error(attempt, end)
        draining = error_code_of(error) == JobDrainedError.code
        verdict = decide_failure(
            error,
            retry=handle.retry,
            attempt=claimed.attempt,
            now_ms=now,
            duration_ms=duration,
            draining=draining,
            rng=rng,
        )
        if not draining and unreachable_failure(error):
            # The store was away, not the job at fault: handed back uncounted while the row's
            # tally allows; the ordinary verdict is the fallback (ujobs.execution.outage).
            fallback, verdict = verdict, outage_verdict(verdict, now)
        outcome, stop, resume_at, nack = (
            verdict.outcome,
            verdict.stop,
            verdict.resume_at_ms,
            verdict.options,
        )
        # A step refused or a renewal answered "not ours" because the row's whole keyspace is
        # gone (a Redis back empty): reported once for every row (ujobs.execution.store_loss).
        wiped = error_code_of(error) == LeaseLostError.code and await store_lost(driver, claimed)
        _log_failure(claimed, handle, outcome, stop, error, resume_at, now, quiet=wiped)
        exhausted = verdict.settled_error
    if progress.close():
        await progress.flush()
    if step is not None:
        step.close(partial(_settled_error, claimed.name, outcome))
    answer = await settle_answer(
        claimed,
        driver=driver,
        nack=nack,
        duration_ms=duration,
        outcome=outcome,
        before_settle=before_settle,
        lease_left=lease_left,
        report_refusal=fallback is None,
        result=stored_result,
    )
    if answer == "refused" and fallback is not None and error is not None:
        # Refused: the row was already handed back MAX_UNREACHABLE_RETURNS times for an outage
        # (or the claim is gone, which the ordinary verdict's fence answers the same way).
        outcome, stop, resume_at = fallback.outcome, fallback.stop, fallback.resume_at_ms
        _log_failure(
            claimed, handle, outcome, stop, error, resume_at, now, cap=MAX_UNREACHABLE_RETURNS
        )
        exhausted = fallback.settled_error
        answer = await settle_answer(
            claimed,
            driver=driver,
            nack=fallback.options,
            duration_ms=duration,
            outcome=outcome,
            before_settle=None,
            lease_left=lease_left,
        )
    landed = answer == "landed"
    if landed and exhausted is not None:
        error = exhausted  # logged as thrown; settled X_JOB_MAX_ATTEMPTS, the thrown its cause
    hook_error = None
    if landed and OUTCOMES[outcome].tells_on_settled and handle.definition.on_settled is not None:
        settled: Settled[Any] = Settled(
            outcome=cast(SettledOutcome, outcome),  # only endings tell the hook
            job_id=claimed.id,
            run_id=claimed.run_id,
            name=claimed.name,
            attempt=claimed.attempt,
            input=parsed_input,
            ctx=ctx,
            result=end.result if outcome == "completed" else None,
            error=error,
            code=error_code_of(error) if error is not None else None,
        )
        hook_error = await tell_settled(
            handle, settled, tenant=tenant, traceparent=claimed.traceparent
        )
    return JobExecution(  # positional, in field order (the module's docstring)
        outcome,  # outcome
        claimed.id,  # job_id
        claimed.run_id,  # run_id
        claimed.name,  # name
        claimed.queue,  # queue
        claimed.attempt,  # attempt
        landed,  # settled
        duration,  # duration_ms
        stop,  # stop_reason
        resume_at,  # resume_at_ms
        end.result if outcome == "completed" else None,  # result
        error,  # error
        error_code_of(error) if error is not None else None,  # code
        hook_error,  # on_settled_error
        end.kind == "abandoned",  # abandoned
    )


def _settled_error(name: str, outcome: str) -> JobAbortedError:
    """Why a step call after the settle is refused (built only when one is made)."""
    return JobAbortedError(
        f"job {name!r}: the attempt is settled ({outcome})",
        meta={"job": name, "outcome": outcome},
    )


def _snooze_limit(claimed: ClaimedJob, snooze: Snooze) -> JobSnoozeLimitError:
    error = JobSnoozeLimitError(
        f"job {claimed.name!r} snoozed {claimed.snoozes} times, the most a run may "
        f"(MAX_SNOOZES); this snooze ({snooze}) dead-letters it: schedule the retry as a new "
        "job, or sleep in a step (step.sleep) for waits that long",
        meta={"job": claimed.name, "snoozes": claimed.snoozes},
    )
    error.__cause__ = snooze
    return error


def _log_failure(
    claimed: ClaimedJob,
    handle: JobHandle[Any],
    outcome: str,
    stop: StopReason | None,
    error: BaseException,
    resume_at: int | None,
    now: int,
    *,
    cap: int | None = None,
    quiet: bool = False,
) -> None:
    fields = {
        "job": claimed.name,
        "job_id": claimed.id,
        "run_id": claimed.run_id,
        "queue": claimed.queue,
        "attempt": claimed.attempt,
        "max_attempts": handle.retry.attempts,
        "code": error_code_of(error) or type(error).__name__,
        "outcome": outcome,
        "stop": stop,
        "retry_in_ms": None if resume_at is None else max(0, resume_at - now),
    }
    if cap is not None:
        fields["unreachable_cap"] = cap  # the row was handed back uncounted that often already
    if outcome == "interrupted":
        log.info("jobs.attempt.interrupted", extra=fields)
        return
    level = logging.DEBUG if quiet else logging.WARNING if stop is None else logging.ERROR
    log.log(
        level,
        "jobs.attempt.failed",
        exc_info=(type(error), error, error.__traceback__),
        extra=fields,
    )
