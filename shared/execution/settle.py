"""Settling an attempt: the failure verdict, the ack/nack on the wire, and the worker's two
settles that never run a body (``refuse_job``, ``hand_back``).

The verdict reads the thrown error's retry classification (``retry_class_of``):

| Thrown | Queue |
|---|---|
| a ``terminal`` code | dead-lettered on this attempt (``stop='terminal'``), the verdict appended to
  ``last_error`` so ``ujobs jobs show`` explains an attempt 1 of 5 |
| a ``retry-after`` code with ``meta.retryAfterSeconds`` | retried at the stated time, clamped by
  ``max_delay``, spread unless ``jitter=False`` — still an attempt, still under the ceiling |
| ``retryable``, unclassified, not ours | retried on the backoff schedule |
| any of those on the final attempt | dead-lettered (``stop='attempts-exhausted'``), settled as
  ``X_JOB_MAX_ATTEMPTS`` with the thrown error as its ``__cause__`` |

``retry.dead_letter=False`` turns every dead-letter into ``dropped`` (the row ``failed``). A
failure while the attempt's signal says ``X_DRAINING`` is none of these: it is ``interrupted``,
handed back uncounted and due at once. So is ``X_DRIVER_UNREACHABLE`` (the store was away, not
the job at fault), a few times per row at most (``outage_verdict``, ``ujobs.execution.outage``).

Every settle here is sent through ``ujobs.execution.outage.send_until_landed``: one that fails
because the store is unreachable is sent again while the lease lasts.
"""

from __future__ import annotations

import logging
import random
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

from ujobs.clock import Clock
from ujobs.drivers.base import ClaimedJob, JobDriver, NackOptions
from ujobs.errors import (
    JobKeyBusyError,
    JobMaxAttemptsError,
    RetryClass,
    UltimateError,
    error_code_of,
    retry_class_of,
)
from ujobs.execution.on_settled import tell_settled
from ujobs.execution.outage import (
    LeaseLeft,
    SettleAnswer,
    claim_lease_left,
    outage_hand_back,
    send_until_landed,
)
from ujobs.execution.outcome import JobExecution
from ujobs.execution.run import Settled
from ujobs.execution.scope import ContextSpec, build_ctx, job_scope, parse_stored
from ujobs.execution.store_loss import store_lost
from ujobs.jobs.job import JobHandle
from ujobs.jobs.retry import Retry, StopReason, retry_delay_ms, stop_reason

log = logging.getLogger("ujobs.jobs")

BeforeSettle = Callable[[], Awaitable[None] | None]
"""Called right before the ack/nack is sent; awaited when it answers an awaitable (the worker's
``HeldRun.stop`` is plain: it only flags the run, and a coroutine a settle costs a frame)."""

HAND_BACK_DELAY_MS = 1_000
"""A shed or a limit: due again after about one poll, so the row does not spin on one worker."""
UNKNOWN_JOB_DELAY_MS = 30_000
"""An unknown job name (a rolling deploy: an older worker claimed a newer job): due again
after a while, long enough for a worker that knows the name to take it first."""
MAX_LAST_ERROR_CHARS = 8_000

FailureOutcome = Literal["retried", "dead-lettered", "dropped", "interrupted"]


def error_headline(error: BaseException) -> str:
    """``CODE: message`` for our errors, ``TypeName: message`` for anything else."""
    if isinstance(error, UltimateError):
        return str(error)
    code = error_code_of(error)
    text = str(error)
    label = code or type(error).__name__
    return f"{label}: {text}" if text else label


def last_error_text(error: BaseException, verdict: str | None = None) -> str:
    """What ``last_error`` carries: the headline, the stop verdict, then the stack (capped)."""
    parts = [error_headline(error)]
    if verdict:
        parts.append(verdict)
    stack = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    parts.append(stack.rstrip())
    text = "\n".join(parts)
    return text if len(text) <= MAX_LAST_ERROR_CHARS else text[: MAX_LAST_ERROR_CHARS - 1] + "…"


_STACK_STARTS = (
    "Traceback (most recent call last):",
    "Exception Group Traceback (most recent call last):",
    "The above exception was the direct cause of the following exception:",
    "During handling of the above exception, another exception occurred:",
)


def error_summary(text: str | None) -> str | None:
    """``last_error`` without its stack: the headline (code and message) and the stop verdict.
    What a tenant's token is shown: the stack names the server's files and code, which are
    the operator's to read."""
    if text is None:
        return None
    kept: list[str] = []
    for line in text.split("\n"):
        if line.lstrip(" +|").startswith(_STACK_STARTS):
            break
        kept.append(line)
    return "\n".join(kept).rstrip()


@dataclass(frozen=True, slots=True)
class FailureVerdict:
    outcome: FailureOutcome
    stop: StopReason | None
    retry_class: RetryClass
    options: NackOptions
    resume_at_ms: int | None
    last_error: str | None
    settled_error: BaseException | None = None
    """What the attempt settles with when it is not the thrown error: ``X_JOB_MAX_ATTEMPTS``
    (its ``__cause__`` the thrown one) once the attempts are exhausted."""


def max_attempts_error(error: BaseException, attempt: int, attempts: int) -> JobMaxAttemptsError:
    """The spec's exhausted-retries error; the thrown one stays reachable as its cause."""
    exhausted = JobMaxAttemptsError(
        f"attempt {attempt} of {attempts} failed, none left; the last error: "
        f"{error_headline(error)}",
        meta={"attempt": attempt, "attempts": attempts, "cause": error_code_of(error)},
    )
    exhausted.__cause__ = error
    return exhausted


def decide_failure(
    error: BaseException,
    *,
    retry: Retry,
    attempt: int,
    now_ms: int,
    duration_ms: int | None,
    draining: bool = False,
    rng: random.Random | None = None,
) -> FailureVerdict:
    """The one decision for a failed attempt; pure, so every row of the table is testable."""
    cls = retry_class_of(error)
    if draining:
        return FailureVerdict(
            "interrupted",
            None,
            cls,
            NackOptions(count=False, run_at_ms=now_ms),
            now_ms,
            None,
        )
    code = error_code_of(error) or type(error).__name__
    stop = stop_reason(retry, attempt, error)
    if stop is not None:
        if stop == "terminal":
            verdict = (
                f"stop: terminal — {code} is classified terminal; dead-lettered on attempt "
                f"{attempt} of {retry.attempts}, {max(0, retry.attempts - attempt)} left unspent"
            )
            settled: BaseException | None = None
        else:
            verdict = f"stop: attempts-exhausted — attempt {attempt} of {retry.attempts} failed"
            settled = max_attempts_error(error, attempt, retry.attempts)
        text = last_error_text(settled or error, verdict)
        if retry.dead_letter:
            options = NackOptions(error=text, dead_letter=True, duration_ms=duration_ms)
            return FailureVerdict("dead-lettered", stop, cls, options, None, text, settled)
        options = NackOptions(error=text, fail=True, duration_ms=duration_ms)
        return FailureVerdict("dropped", stop, cls, options, None, text, settled)
    delay = retry_delay_ms(retry, attempt, error, rng)
    text = last_error_text(error)
    resume = now_ms + delay
    options = NackOptions(error=text, run_at_ms=resume, duration_ms=duration_ms)
    return FailureVerdict("retried", None, cls, options, resume, text)


def outage_verdict(ordinary: FailureVerdict, now_ms: int) -> FailureVerdict:
    """An attempt that failed only because the store was unreachable: ``interrupted``, handed
    back uncounted and due now, fenced on the row's outage tally (``ujobs.execution.outage``);
    ``ordinary`` is what is sent instead once the row reached its cap."""
    return FailureVerdict(
        "interrupted", None, ordinary.retry_class, outage_hand_back(now_ms), now_ms, None
    )


async def send_settle(
    claimed: ClaimedJob,
    *,
    driver: JobDriver,
    nack: NackOptions | None,
    duration_ms: int | None,
    outcome: str,
    before_settle: BeforeSettle | None,
    lease_left: LeaseLeft | None = None,
) -> bool:
    """``settle_answer`` reduced to whether the settle landed."""
    answer = await settle_answer(
        claimed,
        driver=driver,
        nack=nack,
        duration_ms=duration_ms,
        outcome=outcome,
        before_settle=before_settle,
        lease_left=lease_left,
    )
    return answer == "landed"


async def settle_answer(
    claimed: ClaimedJob,
    *,
    driver: JobDriver,
    nack: NackOptions | None,
    duration_ms: int | None,
    outcome: str,
    before_settle: BeforeSettle | None,
    lease_left: LeaseLeft | None = None,
    report_refusal: bool = True,
    result: str | None = None,
) -> SettleAnswer:
    """``before_settle`` (the worker stops its heartbeat), then the ack (``nack=None``) or the
    nack. A driver that could not reach its store (``X_DRIVER_UNREACHABLE``) is asked again
    while ``lease_left()`` (default: the claim's own lease) says the row is still ours
    (``ujobs.execution.outage``). A refusal logs ``jobs.settle.unowned`` unless
    ``report_refusal=False`` (the caller has a second settle to try), at debug when the row's
    keyspace was wiped (``ujobs.execution.store_loss`` reports that once); a driver error logs
    ``jobs.settle.failed`` — the row stays running and its lease lapses, which is what
    at-least-once already promises. ``result`` (an ack's) is the encoded JSON the ack stores
    with the row (``ujobs.results``). The run's fleet slot (``claimed.slot``) rides the settle
    (``JobDriver.ack``'s ``slot``): released in the settle's own write."""
    if before_settle is not None:
        try:
            waiting = before_settle()
            if waiting is not None:
                await waiting
        except Exception:
            log.exception("jobs.settle.before-failed", extra=_settle_fields(claimed, outcome))

    def send() -> Awaitable[bool]:
        # ``claimed.slot``: the fleet slot the run holds, released by this same settle
        if nack is None:
            return driver.ack(
                claimed.id, claimed.ref, duration_ms=duration_ms, result=result, slot=claimed.slot
            )
        return driver.nack(claimed.id, claimed.ref, nack, slot=claimed.slot)

    try:
        answer: SettleAnswer = "landed" if await send() else "refused"
        tries = 1
    except Exception as exc:
        landing = await send_until_landed(
            send,
            lease_left=lease_left or claim_lease_left(claimed, driver.clock),
            fields=partial(_settle_fields, claimed, outcome),
            first_failure=exc,
        )
        answer, tries = landing.answer, landing.tries
    if answer == "refused" and report_refusal:
        # After a try that could not reach the store, the refusal may be that try's own
        # landing, its answer lost with the connection. A row whose whole keyspace went (a
        # Redis back empty) is reported once for all of them (ujobs.execution.store_loss).
        wiped = await store_lost(driver, claimed)
        log.log(
            logging.DEBUG if wiped else logging.WARNING,
            "jobs.settle.unowned",
            extra={
                **_settle_fields(claimed, outcome),
                "after_unreachable": tries > 1,
                "store_lost": wiped,
            },
        )
    return answer


def _settle_fields(claimed: ClaimedJob, outcome: str) -> dict[str, Any]:
    """The log fields of a settle that went wrong (built only then: the hot path logs nothing)."""
    return {
        "job": claimed.name,
        "job_id": claimed.id,
        "run_id": claimed.run_id,
        "queue": claimed.queue,
        "attempt": claimed.attempt,
        "worker_id": claimed.worker_id,
        "claim": claimed.claim,
        "outcome": outcome,
    }


async def refuse_job(
    claimed: ClaimedJob,
    *,
    driver: JobDriver,
    handle: JobHandle[Any],
    context: ContextSpec,
    code: str = JobKeyBusyError.code,
    before_settle: BeforeSettle | None = None,
    lease_left: LeaseLeft | None = None,
) -> JobExecution:
    """``when_busy='fail'`` over a busy key: the body never runs; the row settles ``failed``
    with the code in ``last_error``, the attempt uncounted, ``jobs_total`` ``failed``, and
    ``on_settled`` is told ``refused``. Not a dead letter; ``ujobs jobs retry`` re-queues it."""
    if code == JobKeyBusyError.code:
        error: UltimateError = JobKeyBusyError(
            f"job {claimed.name!r}: its concurrency key already holds its limit of runs; "
            f"see ujobs jobs list --name {claimed.name} --state running --json",
            meta={"job": claimed.name},
        )
    else:
        error = UltimateError(f"job {claimed.name!r} was refused ({code})", code=code)
    options = NackOptions(error=str(error), fail=True, count=False)
    landed = await send_settle(
        claimed,
        driver=driver,
        nack=options,
        duration_ms=None,
        outcome="refused",
        before_settle=before_settle,
        lease_left=lease_left,
    )
    log.info(
        "jobs.attempt.refused",
        extra={"job": claimed.name, "job_id": claimed.id, "code": code, "settled": landed},
    )
    hook_error = None
    if landed:
        parsed = parse_stored(handle, claimed.input, stored_tenant=claimed.tenant_id)
        with job_scope(parsed.tenant, claimed.traceparent):
            try:
                ctx = build_ctx(context)
            except Exception:
                ctx = None
        settled: Settled[Any] = Settled(
            outcome="refused",
            job_id=claimed.id,
            run_id=claimed.run_id,
            name=claimed.name,
            attempt=claimed.attempt,
            input=parsed.value if parsed.ok else None,
            ctx=ctx,
            error=error,
            code=code,
        )
        hook_error = await tell_settled(
            handle, settled, tenant=parsed.tenant, traceparent=claimed.traceparent
        )
    return JobExecution(
        outcome="refused",
        job_id=claimed.id,
        run_id=claimed.run_id,
        name=claimed.name,
        queue=claimed.queue,
        attempt=claimed.attempt,
        settled=landed,
        duration_ms=0,
        error=error,
        code=code,
        on_settled_error=hook_error,
    )


async def hand_back(
    claimed: ClaimedJob,
    *,
    driver: JobDriver,
    reason: str,
    delay_ms: int | None = None,
    clock: Clock | None = None,
    before_settle: BeforeSettle | None = None,
    lease_left: LeaseLeft | None = None,
) -> JobExecution:
    """Give a claimed row back without running it: uncounted, no counter, no hook.

    ``reason`` is ``'shed'`` / ``'limit'`` (due again after ``HAND_BACK_DELAY_MS``) or
    ``'unknown-job'`` — a name this worker's code does not declare, logged
    ``jobs.execute.unknown-job`` and due again after ``UNKNOWN_JOB_DELAY_MS``. An unknown name
    is never dead-lettered: in a rolling deploy an older worker may claim a newer job.
    """
    if delay_ms is None:
        delay_ms = UNKNOWN_JOB_DELAY_MS if reason == "unknown-job" else HAND_BACK_DELAY_MS
    resume = (clock or driver.clock).now_ms() + max(0, delay_ms)
    if reason == "unknown-job":
        log.warning(
            "jobs.execute.unknown-job",
            extra={
                "job": claimed.name,
                "job_id": claimed.id,
                "queue": claimed.queue,
                "retry_in_ms": delay_ms,
            },
        )
    landed = await send_settle(
        claimed,
        driver=driver,
        nack=NackOptions(count=False, run_at_ms=resume),
        duration_ms=None,
        outcome="handed-back",
        before_settle=before_settle,
        lease_left=lease_left,
    )
    return JobExecution(
        outcome="handed-back",
        job_id=claimed.id,
        run_id=claimed.run_id,
        name=claimed.name,
        queue=claimed.queue,
        attempt=claimed.attempt,
        settled=landed,
        duration_ms=0,
        resume_at_ms=resume,
    )
