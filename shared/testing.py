"""Helpers for YOUR test suite: run your jobs in-process, on the memory driver, on a frozen clock.

::

    from ujobs.testing import drain, enqueued, install_memory_driver

    async def test_onboarding_finishes() -> None:
        driver = install_memory_driver()        # a frozen clock; every enqueue lands here
        await onboard_org.enqueue({"org_id": "acme"})
        assert [row.input for row in enqueued(onboard_org)] == [{"org_id": "acme"}]
        drained = await drain(onboard_org)      # sleeps and retry waits pass on the frozen clock
        assert drained.outcomes() == {"completed": 1}

Each attempt runs exactly as a worker runs it (the same attempt, settle and retry code), one at
a time, in the calling task; no worker, no heartbeat, no process-wide state but the installed
driver, which ``uninstall_memory_driver()`` takes away again.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ujobs.clock import FrozenClock
from ujobs.drivers.base import ClaimOptions, JobRow
from ujobs.drivers.memory.driver import MemoryDriver, memory_driver
from ujobs.errors import InvariantError, JobUnknownError
from ujobs.execution.attempt import execute_job
from ujobs.execution.outcome import ExecutionOutcome, JobExecution
from ujobs.execution.scope import ContextSpec
from ujobs.jobs.app_context import open_app_context
from ujobs.jobs.enqueue_target import has_job_driver, job_driver, set_job_driver
from ujobs.jobs.job import JobHandle
from ujobs.jobs.registry import Api, registry

# 2023-11-14 22:13:20 UTC: a fixed start, so a test's timestamps are the same every run.
DEFAULT_START_MS = 1_700_000_000_000
DRAIN_WORKER_ID = "ujobs.testing.drain"
DRAIN_VISIBILITY_MS = 30_000
DEFAULT_MAX_ATTEMPTS = 1_000

__all__ = [
    "Drained",
    "drain",
    "enqueued",
    "install_memory_driver",
    "uninstall_memory_driver",
]


def install_memory_driver(clock: FrozenClock | None = None) -> MemoryDriver:
    """Install a fresh memory driver on a frozen clock (``clock``, or one at
    ``DEFAULT_START_MS``) as the process's job driver, and answer it."""
    driver = memory_driver(clock=clock or FrozenClock(DEFAULT_START_MS))
    set_job_driver(driver)
    return driver


def uninstall_memory_driver() -> None:
    """Take the installed driver away again (call it in your fixture's teardown)."""
    set_job_driver(None)


@dataclass(frozen=True)
class Drained:
    """What ``drain`` ran: every attempt in the order it ran."""

    executions: list[JobExecution] = field(default_factory=list)

    def outcomes(self) -> dict[ExecutionOutcome, int]:
        """How many attempts ended each way (``completed``, ``retried``, ``dead-lettered``,
        ``suspended``, ...); outcomes no attempt had are absent."""
        return dict(Counter(execution.outcome for execution in self.executions))

    def results(self, job: JobHandle[Any]) -> list[Any]:
        """What ``job``'s completed runs returned, in the order they completed."""
        return [
            execution.result
            for execution in self.executions
            if execution.name == job.name and execution.outcome == "completed"
        ]


async def drain(
    *jobs: JobHandle[Any],
    api: Api | None = None,
    queues: Iterable[str] | None = None,
    context: ContextSpec = None,
    driver: MemoryDriver | None = None,
    advance_clock: bool = True,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
) -> Drained:
    """Run every due row until none is left, one attempt at a time; answers what ran.

    Rows are run by the handle of their job's name: one of ``jobs``, else ``api``'s, else the
    process registry's (what ``define_api`` installed); a row no handle names is
    ``X_JOB_UNKNOWN``. ``queues`` narrows the drain (default: the queues of ``jobs``, or every
    queue when none is passed). ``context`` is your app's ctx, as a worker would be handed it;
    without it, ``api``'s ``define_api(context=)`` factory is entered around the drain, as a
    worker enters it around its life, and what it yields is ``run.ctx``.

    With ``advance_clock`` (the default), when nothing is due but a row waits (a
    ``run.step.sleep``, a retry's backoff, a ``run_at`` in the future), the frozen clock is
    moved to the earliest such row and the drain goes on; so a job that sleeps three days runs
    to its end in one call. More than ``max_attempts`` attempts is ``X_INVARIANT`` (a body that
    waits for an event nobody publishes polls forever).
    """
    target = driver if driver is not None else installed_memory_driver()
    if context is None and api is not None and api.context is not None:
        async with contextlib.AsyncExitStack() as stack:
            ctx = await open_app_context(stack, api.context)
            return await _drain(jobs, api, queues, lambda: ctx, target, advance_clock, max_attempts)
    return await _drain(jobs, api, queues, context, target, advance_clock, max_attempts)


async def _drain(
    jobs: tuple[JobHandle[Any], ...],
    api: Api | None,
    queues: Iterable[str] | None,
    context: ContextSpec,
    target: MemoryDriver,
    advance_clock: bool,
    max_attempts: int,
) -> Drained:
    handles = {job.name: job for job in jobs}
    if queues is not None:
        chosen = sorted(set(queues))
    elif jobs:
        chosen = sorted({job.queue for job in jobs})
    else:
        chosen = sorted({row.queue for row in target.state.rows.values()})
    executions: list[JobExecution] = []
    while chosen:
        claimed = await target.claim(
            ClaimOptions(
                queues=chosen,
                limit=1,
                worker_id=DRAIN_WORKER_ID,
                visibility_ms=DRAIN_VISIBILITY_MS,
            )
        )
        if not claimed:
            if not advance_clock or not _advance(target, chosen):
                break
            continue
        if len(executions) >= max_attempts:
            raise InvariantError(
                f"drain ran {max_attempts} attempts and rows are still due; a body may wait "
                "for an event nobody publishes (pass advance_clock=False, or a larger "
                "max_attempts)",
                meta={"maxAttempts": max_attempts},
            )
        row = claimed[0]
        handle = handles.get(row.name) or _known(api, row.name)
        if handle is None:
            raise JobUnknownError(
                f"drain claimed a {row.name!r} row but no handle has that name: pass the job "
                "to drain(...), or its api=",
                meta={"name": row.name},
            )
        executions.append(await execute_job(row, driver=target, handle=handle, context=context))
    return Drained(executions)


def enqueued(job: JobHandle[Any], *, driver: MemoryDriver | None = None) -> list[JobRow]:
    """``job``'s rows still waiting to run (``ready``, ``delayed`` or ``suspended``), oldest
    first."""
    target = driver if driver is not None else installed_memory_driver()
    waiting = [
        row
        for row in target.state.rows.values()
        if row.name == job.name and row.state in ("ready", "delayed", "suspended")
    ]
    waiting.sort(key=lambda row: (row.created_at_ms, row.seq))
    return [row.view() for row in waiting]


def installed_memory_driver() -> MemoryDriver:
    """The installed job driver, which these helpers need to be a memory driver."""
    current = job_driver() if has_job_driver() else None
    if not isinstance(current, MemoryDriver):
        raise InvariantError(
            "ujobs.testing runs jobs on the memory driver: call install_memory_driver() first "
            "(or pass driver=)",
            meta={"installed": type(current).__name__},
        )
    return current


def _known(api: Api | None, name: str) -> JobHandle[Any] | None:
    found = api.jobs.get(name) if api is not None else None
    return found if found is not None else registry().job(name)


def _advance(driver: MemoryDriver, queues: list[str]) -> bool:
    """Move the frozen clock to the earliest waiting row of ``queues``; False when none waits
    (or the clock is not frozen)."""
    clock = driver.clock
    if not isinstance(clock, FrozenClock):
        return False
    waiting = [
        row.run_at_ms
        for row in driver.state.rows.values()
        if row.queue in queues
        and row.queue not in driver.state.paused_queues
        and row.state in ("ready", "delayed", "suspended")
        and row.run_at_ms > clock.now_ms()
    ]
    if not waiting:
        return False
    clock.set(min(waiting))
    return True
