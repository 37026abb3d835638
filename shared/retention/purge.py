"""``purge()``: a retention sweep declared as a job, with its cron task.

The sweep is the second factory over ``job()``: its retry policy, queue, cancellation and
dead-letter path are a job's. One pass reads the clock ONCE (and keeps the reading as a step, so
a retried attempt sweeps against the same instant), then runs one ``step.run`` per target, named
after the target: an attempt killed mid-pass resumes at the table it stopped on. A replayed
delete removes rows that are already gone, so at least once is safe here.

``targets`` is a list or a zero-argument function answering one, read once per ATTEMPT and never
captured: a host declares the sweep at boot, and some of the stores behind it are built later.
Two targets under one name are ``X_INVARIANT`` before the first delete (``step.run`` would raise
``X_STEP_DUPLICATE`` after one table was already empty).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ujobs.clock import SYSTEM_CLOCK, Clock
from ujobs.drivers.base import DEFAULT_QUEUE
from ujobs.errors import InvariantError
from ujobs.execution.run import Run
from ujobs.jobs.enqueue_target import has_job_driver, job_driver
from ujobs.jobs.job import JobHandle, job
from ujobs.jobs.retry import Retry
from ujobs.jobs.schema import t
from ujobs.jobs.task import TaskHandle, task

DEFAULT_PURGE_CRON = "0 * * * *"
"""Hourly, on the hour (UTC)."""

CLOCK_STEP = "clock"
"""The step holding the pass's one clock reading; a target may not take this name."""


@runtime_checkable
class PurgeTarget(Protocol):
    """Structural: anything with a ``name`` and ``purge_expired(now_ms) -> rows removed``."""

    @property
    def name(self) -> str: ...

    async def purge_expired(self, now_ms: int) -> int: ...


Targets = Sequence[PurgeTarget] | Callable[[], Sequence[PurgeTarget]]


def check_targets(sweep: str, targets: Any) -> list[PurgeTarget]:
    """The targets as a list, each a ``PurgeTarget`` with a name unique in the sweep."""
    if isinstance(targets, str | bytes) or not isinstance(targets, Sequence):
        raise InvariantError(
            f"purge {sweep!r}: targets must be a list of purge targets (name, purge_expired)",
            meta={"purge": sweep},
        )
    seen: set[str] = set()
    checked: list[PurgeTarget] = []
    for target in targets:
        name = getattr(target, "name", None)
        if (
            not isinstance(name, str)
            or not name
            or not callable(getattr(target, "purge_expired", None))
        ):
            raise InvariantError(
                f"purge {sweep!r}: {target!r} is not a purge target; it needs a name and "
                "purge_expired(now_ms) answering the rows it removed",
                meta={"purge": sweep},
            )
        if name in seen or name == CLOCK_STEP:
            raise InvariantError(
                f"purge {sweep!r}: two targets are named {name!r}; each target is one step of "
                "the pass, so each needs its own name",
                meta={"purge": sweep, "target": name},
            )
        seen.add(name)
        checked.append(target)
    return checked


def _removed(sweep: str, target: str, answer: Any) -> int:
    if isinstance(answer, bool) or not isinstance(answer, int) or answer < 0:
        raise InvariantError(
            f"purge {sweep!r}: target {target!r} answered {answer!r}; purge_expired must "
            "answer the number of rows it removed",
            meta={"purge": sweep, "target": target},
        )
    return answer


@dataclass(frozen=True, slots=True)
class Purge:
    """What ``purge()`` answers: the sweep ``job`` and, with a ``cron``, the ``task`` that
    enqueues it. Register the task (``define_api(tasks=[...])`` finds it exported) and the job
    comes with it."""

    job: JobHandle[Any]
    task: TaskHandle | None
    targets: Targets

    @property
    def name(self) -> str:
        return self.job.name

    def current_targets(self) -> list[PurgeTarget]:
        """The targets as the next attempt will read them."""
        raw = self.targets() if callable(self.targets) else self.targets
        return check_targets(self.name, raw)

    async def run_once(self, *, clock: Clock = SYSTEM_CLOCK) -> dict[str, int]:
        """One pass by hand, outside the queue (``ujobs db purge``): rows removed per target,
        against one reading of ``clock``."""
        targets = self.current_targets()
        now_ms = clock.now_ms()
        return {
            target.name: _removed(self.name, target.name, await target.purge_expired(now_ms))
            for target in targets
        }


def purge(
    *,
    name: str,
    targets: Targets,
    cron: str | None = DEFAULT_PURGE_CRON,
    tz: str = "UTC",
    queue: str = DEFAULT_QUEUE,
    clock: Clock | None = None,
    retry: Retry | None = None,
    description: str | None = None,
) -> Purge:
    """Declare a retention sweep: a job running one step per target, and (``cron``, hourly by
    default; None for none) the task that enqueues it. ``clock`` is the pass's clock; by
    default the installed driver's, so a frozen test clock reaches the sweep."""
    if isinstance(targets, Sequence):
        check_targets(name, targets)
    elif not callable(targets):
        raise InvariantError(
            f"purge {name!r}: targets must be a list or a function answering one",
            meta={"purge": name},
        )

    async def sweep(run: Run[Any]) -> dict[str, Any]:
        raw = targets() if callable(targets) else targets
        if inspect.isawaitable(raw):
            raise InvariantError(
                f"purge {name!r}: targets() must answer a list, not an awaitable",
                meta={"purge": name},
            )
        current = check_targets(name, raw)
        now_ms = await run.step.run(CLOCK_STEP, lambda _signal: _pass_clock(clock).now_ms())
        removed: dict[str, int] = {}
        for target in current:
            answer = await run.step.run(target.name, _delete(target, int(now_ms)))
            removed[target.name] = _removed(name, target.name, answer)
        return {"nowMs": now_ms, "removed": removed, "total": sum(removed.values())}

    handle = job(
        name=name,
        run=sweep,
        input=t.object(),
        idempotency_key=name,
        tenant="none",
        queue=queue,
        retry=retry,
        description=description or f"retention sweep over {_describe(targets)}",
    )
    cron_task = None if cron is None else purge_task(handle, cron=cron, tz=tz)
    return Purge(job=handle, task=cron_task, targets=targets)


def purge_task(sweep: JobHandle[Any], *, cron: str, tz: str = "UTC") -> TaskHandle:
    """The cron task ``<sweep>.cron`` that enqueues ``sweep`` at every occurrence."""
    return task(
        name=f"{sweep.name}.cron",
        cron=cron,
        tz=tz,
        enqueue=lambda _occurrence: [(sweep, {})],
        description=f"enqueues the {sweep.name} sweep",
    )


def _delete(target: PurgeTarget, now_ms: int) -> Callable[[Any], Any]:
    async def delete(_signal: Any) -> int:
        return await target.purge_expired(now_ms)

    return delete


def _pass_clock(clock: Clock | None) -> Clock:
    if clock is not None:
        return clock
    if has_job_driver():
        return job_driver().clock
    return SYSTEM_CLOCK


def _describe(targets: Targets) -> str:
    if callable(targets):
        return "the targets its host provides"
    return ", ".join(target.name for target in targets) or "no targets"
