"""``task()``: a cron line, its IANA zone, and the jobs each occurrence puts on the queue.

A task's ``enqueue`` is synchronous by design — ``(occurrence_ms) -> [(job, input), ...]`` — so
``describe()`` can read its job names without I/O and the tick stays cheap. Work that reads a
database is a fan-out *job* the task enqueues, not the task.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import zoneinfo
from collections.abc import Callable, Sequence
from typing import Any, Literal, overload

from ujobs.clock import SYSTEM_CLOCK, Clock
from ujobs.drivers.base import Enqueued, EnqueueRequest
from ujobs.errors import TaskDeclarationInvalidError
from ujobs.ids import derived_id
from ujobs.jobs.enqueue_target import jobs_facade
from ujobs.jobs.job import JobHandle, claim_declared_name, validate_name

CatchUp = Literal["skip", "run-once", "run-all"]
CATCH_UP_POLICIES: tuple[CatchUp, ...] = ("skip", "run-once", "run-all")
DEFAULT_MAX_CATCH_UP = 10
TaskEntry = tuple[JobHandle[Any], Any]
EnqueueFn = Callable[[int], Sequence[TaskEntry]]


def occurrence_ids(task: str, occurrence_ms: int, index: int, job: str) -> tuple[str, str]:
    """The job id and run id of entry ``index`` (job ``job``) of one occurrence of ``task``:
    the same every time that occurrence is fired, in any process."""
    parts = (task, str(occurrence_ms), str(index), job)
    return derived_id(occurrence_ms, "job", *parts), derived_id(occurrence_ms, "run", *parts)


def _invalid(name: str, message: str, **meta: Any) -> TaskDeclarationInvalidError:
    return TaskDeclarationInvalidError(f"task {name!r}: {message}", meta={"task": name, **meta})


def validate_tz(name: str, tz: Any) -> zoneinfo.ZoneInfo:
    """The zone for ``tz``, validated against the IANA database.

    A non-empty string is not a timezone: ``'Bogota'`` would otherwise resolve every occurrence
    in UTC and run five hours off, silently, forever.
    """
    if not isinstance(tz, str) or not tz:
        raise _invalid(name, "tz is required — an IANA zone such as 'UTC' or 'America/Bogota'")
    try:
        return zoneinfo.ZoneInfo(tz)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        raise _invalid(
            name,
            f"tz {tz!r} is not an IANA timezone; write the full name, e.g. 'America/Bogota'",
            tz=tz,
        ) from None


CRON_ALIASES = frozenset(
    {"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}
)
# croniter's hashed (H) and random (R) fields answer a different minute on every scheduler
# replica, which is a double fire; a fleet needs every node to compute the same occurrence.
_NONDETERMINISTIC = re.compile(r"(?<![A-Za-z])[HR](?![A-Za-z])")


def validate_cron(name: str, cron: Any) -> str:
    """Five fields (minute hour day-of-month month day-of-week), or six with seconds LAST
    (croniter's layout, which ``ujobs.scheduler.cron`` resolves), or an ``@daily``-style alias;
    deterministic, and with at least one occurrence (``0 0 31 2 *`` never fires)."""
    # Imported here: only a process declaring a task reads a cron, and a worker's start-up
    # (which imports this module through the registry) counts against its first claims.
    from croniter import CroniterBadCronError, CroniterBadDateError, croniter

    hint = (
        "write five fields (minute hour day month weekday), e.g. '0 3 * * *', six with "
        "seconds last, or '@daily'"
    )
    if not isinstance(cron, str) or not cron.strip():
        raise _invalid(name, f"cron is required; {hint}", cron=repr(cron))
    text = cron.strip()
    if text.startswith("@"):
        if text.lower() not in CRON_ALIASES:
            raise _invalid(name, f"cron {cron!r} is not a known alias; {hint}", cron=cron)
    elif len(text.split()) not in (5, 6) or not croniter.is_valid(text):
        raise _invalid(name, f"cron {cron!r} is not a valid cron expression; {hint}", cron=cron)
    if _NONDETERMINISTIC.search(text):
        raise _invalid(
            name,
            f"cron {cron!r} uses a hashed (H) or random (R) field; every scheduler must agree "
            "on the occurrence, so name the minute",
            cron=cron,
        )
    try:
        croniter(text, 0).get_next(float)
    except (CroniterBadDateError, CroniterBadCronError, ValueError):
        raise _invalid(name, f"cron {cron!r} never fires; {hint}", cron=cron) from None
    return text


class TaskHandle:
    """One cron task: its entries, a manual fire, its manifest row."""

    kind: Literal["task"] = "task"

    def __init__(
        self,
        *,
        name: str,
        explicit_name: bool,
        cron: str,
        tz: str,
        enqueue: EnqueueFn,
        catch_up: CatchUp,
        max_catch_up: int,
        description: str | None,
        module: str | None = None,
    ) -> None:
        self._name = name
        self.module = module
        self.explicit_name = explicit_name
        self.cron = cron
        self.tz = tz
        self.zone = zoneinfo.ZoneInfo(tz)
        self._enqueue = enqueue
        self.catch_up: CatchUp = catch_up
        self.max_catch_up = max_catch_up
        self.description = description

    @property
    def name(self) -> str:
        return self._name

    def stamp_name(self, name: str) -> None:
        if not self.explicit_name:
            self._name = validate_name(name, kind="task")

    def entries(self, occurrence_ms: int = 0) -> list[TaskEntry]:
        """The declared ``(job, input)`` pairs for one occurrence, checked for shape."""
        produced: Any = self._enqueue(occurrence_ms)
        if inspect.isawaitable(produced):
            if inspect.iscoroutine(produced):
                produced.close()
            raise _invalid(
                self.name,
                "enqueue must be synchronous; work that reads a database is a fan-out job the "
                "task enqueues",
            )
        if isinstance(produced, str | bytes | dict) or not hasattr(produced, "__iter__"):
            raise _invalid(self.name, "enqueue must answer a list of (job_handle, input) pairs")
        entries: list[TaskEntry] = []
        for entry in produced:
            if (
                not isinstance(entry, tuple | list)
                or len(entry) != 2
                or not isinstance(entry[0], JobHandle)
            ):
                raise _invalid(
                    self.name,
                    f"enqueue must answer a list of (job_handle, input) pairs; got {entry!r}",
                )
            entries.append((entry[0], entry[1]))
        return entries

    def requests_for(self, occurrence_ms: int) -> list[EnqueueRequest]:
        """The scheduler's fire: each job's own key scoped to this task and occurrence, so a
        manual ``enqueue()`` stays a distinct row on purpose — and each job's id and run id
        DERIVED from (task, occurrence, entry index, job name) by ``occurrence_ids``. Firing
        the same occurrence again (a crash between the enqueue and the watermark's move, two
        schedulers racing) therefore names the rows the first fire made, and every driver's
        enqueue inserts nothing under an id that already names a row, live or finished."""
        requests = []
        for index, (handle, raw) in enumerate(self.entries(occurrence_ms)):
            value = handle.parse_input(raw)
            key = f"{handle.idempotency_key_for(value)}@{self.name}:{occurrence_ms}"
            job_id, run_id = occurrence_ids(self.name, occurrence_ms, index, handle.name)
            request = handle.request(raw, idempotency_key=key, job_id=job_id, run_id=run_id)
            # The key is the occurrence's own: a job's debounce would only delay the fire, and
            # its unique_for has nothing to collapse (Postgres fires in a statement of its own,
            # which reads neither).
            requests.append(dataclasses.replace(request, debounce_ms=None, unique_for_ms=None))
        return requests

    async def enqueue(self, *, clock: Clock = SYSTEM_CLOCK) -> list[Enqueued]:
        """Fire every entry now, each under its job's own idempotency key; one result each."""
        # Every entry is validated before any is queued: a bad third entry queues nothing.
        entries = self.entries(clock.now_ms())
        requests = [handle.request(raw, clock=clock) for handle, raw in entries]
        facade = jobs_facade()
        return [await facade.enqueue(request) for request in requests]

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "task",
            "name": self.name,
            "cron": self.cron,
            "tz": self.tz,
            "catchUp": self.catch_up,
            "maxCatchUp": self.max_catch_up,
            "description": self.description,
            "jobs": [handle.name for handle, _ in self.entries(0)],
        }

    def __repr__(self) -> str:
        return f"TaskHandle({self.name!r}, cron={self.cron!r}, tz={self.tz!r})"


def _build(
    fn: EnqueueFn,
    *,
    name: str | None,
    cron: str,
    tz: str,
    catch_up: CatchUp,
    max_catch_up: int,
    description: str | None,
) -> TaskHandle:
    explicit = name is not None
    task_name = validate_name(
        name if name is not None else getattr(fn, "__name__", None), kind="task"
    )
    if not callable(fn):
        raise _invalid(task_name, "enqueue must be a function of the occurrence (epoch ms)")
    if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn):
        raise _invalid(
            task_name,
            "enqueue must be synchronous — (occurrence_ms) -> [(job, input), ...]; work that "
            "reads a database is a fan-out job the task enqueues",
        )
    validate_cron(task_name, cron)
    validate_tz(task_name, tz)
    if catch_up not in CATCH_UP_POLICIES:
        raise _invalid(task_name, f"catch_up must be one of {', '.join(CATCH_UP_POLICIES)}")
    if isinstance(max_catch_up, bool) or not isinstance(max_catch_up, int) or max_catch_up < 1:
        raise _invalid(task_name, "max_catch_up must be a whole number of at least 1")
    handle = TaskHandle(
        name=task_name,
        explicit_name=explicit,
        cron=cron,
        tz=tz,
        enqueue=fn,
        catch_up=catch_up,
        max_catch_up=max_catch_up,
        description=description if description is not None else inspect.getdoc(fn),
        module=getattr(fn, "__module__", None),
    )
    if explicit:
        claim_declared_name(task_name, handle, kind="task")
    return handle


@overload
def task(
    *,
    cron: str,
    tz: str,
    enqueue: EnqueueFn,
    name: str,
    catch_up: CatchUp = ...,
    max_catch_up: int = ...,
    description: str | None = ...,
) -> TaskHandle: ...


@overload
def task(
    *,
    cron: str,
    tz: str,
    enqueue: None = ...,
    name: str | None = ...,
    catch_up: CatchUp = ...,
    max_catch_up: int = ...,
    description: str | None = ...,
) -> Callable[[EnqueueFn], TaskHandle]: ...


def task(
    *,
    cron: str,
    tz: str,
    enqueue: EnqueueFn | None = None,
    name: str | None = None,
    catch_up: CatchUp = "skip",
    max_catch_up: int = DEFAULT_MAX_CATCH_UP,
    description: str | None = None,
) -> TaskHandle | Callable[[EnqueueFn], TaskHandle]:
    """Declare a cron task, as a decorator on ``def name(occurrence_ms)`` or with
    ``enqueue=`` and a required ``name=``. ``tz`` is required: a cron without a zone is a bug.
    """
    options: dict[str, Any] = {
        "cron": cron,
        "tz": tz,
        "catch_up": catch_up,
        "max_catch_up": max_catch_up,
        "description": description,
    }
    if enqueue is not None:
        if name is None:
            raise TaskDeclarationInvalidError(
                "task(enqueue=...) needs name=: the name is the task's durable key",
                meta={"field": "name"},
            )
        return _build(enqueue, name=name, **options)

    def decorate(fn: EnqueueFn) -> TaskHandle:
        return _build(fn, name=name, **options)

    return decorate
