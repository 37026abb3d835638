"""``on_settled``: the ONE hook told how a run ended, and the claim round's burial notice.

Told once per ending, AFTER the row is settled, only by the worker whose settle landed, under
the job's declared tenant. At most once across a crash (a worker killed between the settle and
the hook never runs it; nothing re-drives a hook); inside one process ``ON_SETTLED_ATTEMPTS``
tries back to back, so write it idempotent. A hook that throws on every try is logged
``jobs.on-settled.failed`` and reported as ``X_JOB_ON_SETTLED_FAILED`` — the row, the outcome
and the counters are untouched. A retry, a suspension and a drain are not endings: the hook is
not told.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ujobs.drivers.base import LEASE_LAPSED_FINAL_ATTEMPT, ExhaustedJob
from ujobs.errors import JobOnSettledFailedError, error_code_of
from ujobs.execution.run import Settled, SettledOutcome
from ujobs.execution.scope import ContextSpec, build_ctx, job_scope, lookup_handle, parse_stored
from ujobs.jobs.job import JobHandle

log = logging.getLogger("ujobs.jobs")

ON_SETTLED_ATTEMPTS = 3


async def tell_settled(
    handle: JobHandle[Any],
    settled: Settled[Any],
    *,
    tenant: str | None,
    traceparent: str | None = None,
) -> JobOnSettledFailedError | None:
    """Run the job's ``on_settled`` (if declared) under its tenant; answers the failure, if any.

    Never raises for the hook's own errors (a cancellation still propagates).
    """
    hook = handle.definition.on_settled
    if hook is None:
        return None
    last: Exception | None = None
    with job_scope(tenant, traceparent):
        for _ in range(ON_SETTLED_ATTEMPTS):
            try:
                answer = hook(settled)
                if inspect.isawaitable(answer):
                    await answer
                return None
            except Exception as exc:
                last = exc
    assert last is not None
    cause = error_code_of(last) or type(last).__name__
    err = JobOnSettledFailedError(
        f"job {handle.name!r}: on_settled threw on every one of its {ON_SETTLED_ATTEMPTS} tries "
        f"({cause}); the row stays {settled.outcome}",
        meta={
            "job": handle.name,
            "job_id": settled.job_id,
            "outcome": settled.outcome,
            "tries": ON_SETTLED_ATTEMPTS,
            "cause": cause,
        },
    )
    err.__cause__ = last
    log.error(
        "jobs.on-settled.failed",
        exc_info=(type(last), last, last.__traceback__),
        extra={
            "job": handle.name,
            "job_id": settled.job_id,
            "run_id": settled.run_id,
            "outcome": settled.outcome,
            "code": JobOnSettledFailedError.code,
            "cause": cause,
            "tries": ON_SETTLED_ATTEMPTS,
        },
    )
    return err


@dataclass(frozen=True, slots=True)
class ExhaustedAnnouncement:
    """One buried row as the claim round announced it."""

    job_id: str
    name: str
    outcome: SettledOutcome
    known: bool
    on_settled_error: JobOnSettledFailedError | None = None


async def announce_exhausted(
    rows: Sequence[ExhaustedJob],
    *,
    jobs: Any,
    context: ContextSpec = None,
) -> list[ExhaustedAnnouncement]:
    """What a claim round does with the rows its claim buried (``ClaimOptions.on_exhausted``).

    Each row's lease lapsed on its final attempt — every worker that took it died — so the
    claim settled it ``dead`` (``failed`` for a job declaring ``retry.dead_letter=False``).
    Logged ``jobs.claim.exhausted`` at error, then the job's ``on_settled`` is told
    ``dead-lettered`` / ``dropped`` with ``error=LEASE_LAPSED_FINAL_ATTEMPT`` and ``code=None``
    (nothing was thrown). ``jobs`` finds handles by name (a ``Registry``, a mapping or a
    function); a name this process does not know is logged and not told.
    """
    announced: list[ExhaustedAnnouncement] = []
    for row in rows:
        outcome: SettledOutcome = "dead-lettered" if row.state == "dead" else "dropped"
        handle = lookup_handle(jobs, row.name)
        log.error(
            "jobs.claim.exhausted",
            extra={
                "job": row.name,
                "job_id": row.id,
                "run_id": row.run_id,
                "queue": row.queue,
                "attempt": row.attempt,
                "max_attempts": row.max_attempts,
                "state": row.state,
                "outcome": outcome,
                "error": row.last_error,
                "known": handle is not None,
            },
        )
        if handle is None:
            announced.append(ExhaustedAnnouncement(row.id, row.name, outcome, known=False))
            continue
        parsed = parse_stored(handle, row.input, stored_tenant=row.tenant_id)
        with job_scope(parsed.tenant, None):
            try:
                ctx = build_ctx(context)
            except Exception:
                ctx = None
        settled: Settled[Any] = Settled(
            outcome=outcome,
            job_id=row.id,
            run_id=row.run_id,
            name=row.name,
            attempt=row.attempt,
            input=parsed.value if parsed.ok else None,
            ctx=ctx,
            error=row.last_error or LEASE_LAPSED_FINAL_ATTEMPT,
            code=None,
        )
        failure = await tell_settled(handle, settled, tenant=parsed.tenant)
        announced.append(
            ExhaustedAnnouncement(row.id, row.name, outcome, known=True, on_settled_error=failure)
        )
    return announced
