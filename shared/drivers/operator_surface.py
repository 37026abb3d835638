"""The operator surface's contract: the rows, filters, pages and counters an operator reads, and
the ``JobIntrospection`` Protocol a driver with an index of its rows implements (Postgres,
memory). Re-exported by ``ujobs.drivers.base``.
"""

from __future__ import annotations

import base64
import builtins
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

import orjson

from ujobs.drivers.records import (
    DEFAULT_JOB_PAGE,
    MAX_JOB_PAGE,
    ClaimRef,
    JobState,
    JSONValue,
)
from ujobs.errors import JobPageInvalidError

# --- the operator surface -------------------------------------------------------------------


ATTEMPT_ERRORS_KEPT = 10
"""How many attempts' errors a row keeps (the newest); older ones are dropped as new ones come."""

ATTEMPT_ERROR_CHARS = 4_000
"""An attempt's error is kept to this many characters (a traceback's head and its last lines are
in ``last_error`` in full)."""


@dataclass(frozen=True, slots=True)
class AttemptError:
    """One counted attempt that failed: its number, its error text, when it was settled."""

    attempt: int
    error: str
    at_ms: int


@dataclass(frozen=True, slots=True)
class JobRow:
    """A job as the operator surface shows it."""

    id: str
    run_id: str
    name: str
    queue: str
    state: JobState
    input: JSONValue
    tenant_id: str | None
    idempotency_key: str
    attempt: int
    max_attempts: int
    run_at_ms: int
    created_at_ms: int
    updated_at_ms: int
    finished_at_ms: int | None = None
    claimed_by: str | None = None
    claim: int = 0
    lease_expires_at_ms: int | None = None
    last_error: str | None = None
    progress: JSONValue = None
    traceparent: str | None = None
    enqueued_by: str | None = None
    result: JSONValue = None
    """What the body returned (``ujobs.results``); read it only while ``state`` is ``done``
    (a requeued row keeps its last run's until the next ack writes over it)."""
    parent_id: str | None = None
    """The job that enqueued this one as a step (``run.step.enqueue``); None otherwise."""
    priority: int = 0
    """0 (handed out first, the default) to 9 (``EnqueueRequest.priority``)."""


@dataclass(frozen=True, slots=True)
class JobFilter:
    """One page of ``list()``: newest first; ``after`` pages older, ``before`` pages newer.

    Newest first is ``(created_at_ms, id)`` descending. ``created_from_ms`` and ``created_to_ms``
    are both inclusive; ``id_prefix`` matches the start of the id, ignoring case.
    """

    queue: str | None = None
    name: str | None = None
    state: JobState | None = None
    tenant_id: str | None = None
    id_prefix: str | None = None
    created_from_ms: int | None = None
    created_to_ms: int | None = None
    limit: int = DEFAULT_JOB_PAGE
    after: str | None = None
    before: str | None = None


@dataclass(frozen=True, slots=True)
class JobPage:
    rows: list[JobRow]
    limit: int

    @property
    def is_last(self) -> bool:
        """A page shorter than its limit is the last in its direction."""
        return len(self.rows) < self.limit

    @property
    def next_cursor(self) -> str | None:
        return job_cursor(self.rows[-1]) if self.rows else None

    @property
    def prev_cursor(self) -> str | None:
        return job_cursor(self.rows[0]) if self.rows else None


def job_cursor(row: JobRow) -> str:
    """An opaque cursor at ``row`` in newest-first order (created_at, then id)."""
    raw = orjson.dumps([row.created_at_ms, row.id])
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def parse_job_cursor(cursor: str, which: Literal["after", "before"]) -> tuple[int, str]:
    """``(created_at_ms, id)`` from a cursor; one no page produced is ``X_JOB_PAGE_INVALID``."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        created, job_id = orjson.loads(base64.urlsafe_b64decode(padded.encode()))
        if isinstance(created, bool) or not isinstance(created, int) or not isinstance(job_id, str):
            raise ValueError("cursor shape")
        return created, job_id
    except (ValueError, TypeError, orjson.JSONDecodeError) as exc:
        raise JobPageInvalidError(
            f"the {which!r} cursor was not produced by a page; start again without it "
            "(ujobs jobs list --limit 200 --json)",
            meta={"cursor": which},
        ) from exc


def validate_job_filter(
    flt: JobFilter,
) -> tuple[int, tuple[int, str] | None, tuple[int, str] | None]:
    """Check a filter's limit and cursors once, for every driver: ``(limit, after, before)``."""
    if isinstance(flt.limit, bool) or not isinstance(flt.limit, int) or flt.limit < 1:
        raise JobPageInvalidError(
            f"limit must be a whole number from 1 to {MAX_JOB_PAGE}",
            meta={"limit": flt.limit, "max": MAX_JOB_PAGE},
        )
    if flt.limit > MAX_JOB_PAGE:
        raise JobPageInvalidError(
            f"limit {flt.limit} is over MAX_JOB_PAGE ({MAX_JOB_PAGE}); page with after/before",
            meta={"limit": flt.limit, "max": MAX_JOB_PAGE},
        )
    if flt.after is not None and flt.before is not None:
        raise JobPageInvalidError(
            "pass after or before, never both", meta={"cursor": "after+before"}
        )
    after = parse_job_cursor(flt.after, "after") if flt.after is not None else None
    before = parse_job_cursor(flt.before, "before") if flt.before is not None else None
    return flt.limit, after, before


@dataclass(frozen=True, slots=True)
class BulkFilter:
    state: JobState
    queue: str | None = None
    name: str | None = None
    tenant_id: str | None = None


@dataclass(frozen=True, slots=True)
class BulkResult:
    """``remaining`` is what a second call could still move, so "call until zero" ends."""

    affected: int
    remaining: int


@dataclass(frozen=True, slots=True)
class CounterBucket:
    """One bucket of a job's settle history. ``duration_ms`` sums the ``duration_ms`` of the
    ``done`` settles (ack), so ``duration_ms / done`` is the mean successful run."""

    job: str
    bucket_start_ms: int
    width_ms: int
    done: int = 0
    retried: int = 0
    failed: int = 0
    dead: int = 0
    duration_ms: int = 0


@dataclass(frozen=True, slots=True)
class CounterTotals:
    job: str
    done: int = 0
    retried: int = 0
    failed: int = 0
    dead: int = 0
    duration_ms: int = 0


@dataclass(frozen=True, slots=True)
class TenantBacklog:
    """One tenant's due work in one queue: how many of its rows are due (ready, delayed,
    suspended with a run time passed), and the oldest one's run time."""

    tenant_id: str | None
    due: int
    oldest_due_ms: int


@dataclass(frozen=True, slots=True)
class QueueTenants:
    """The tenants with the most due work in a queue (``top`` of them, most first). ``capped``:
    the queue holds more than ``cap`` due rows and only the ``cap`` oldest were read, so the
    counts are lower bounds (a tenant with work only further back is not listed)."""

    tenants: tuple[TenantBacklog, ...]
    capped: bool


@dataclass(frozen=True, slots=True)
class TaskFire:
    task: str
    occurrence_ms: int
    fired_at_ms: int


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """What a worker says about itself in the registry."""

    id: str
    host: str
    pid: int
    started_at_ms: int
    queues: tuple[str, ...]
    slots: int


@dataclass(frozen=True, slots=True)
class WorkerRow:
    id: str
    host: str
    pid: int
    started_at_ms: int
    queues: tuple[str, ...]
    slots: int
    in_flight: tuple[str, ...]
    last_heartbeat_ms: int
    expires_at_ms: int
    draining_at_ms: int | None = None


@runtime_checkable
class JobIntrospection(Protocol):
    """Every operator capability; ``ujobs jobs``, the api and the dashboard read nothing else.

    ``record_progress`` details: a call inside the interval answers True and is not visible
    yet; the driver keeps the latest such value and writes it in the statement of that
    claim's ack or nack, so the last progress before a settle always lands. The interval is
    measured on the driver's clock from the last write.
    """

    async def list(self, flt: JobFilter) -> JobPage: ...

    async def get(self, job_id: str) -> JobRow | None: ...

    async def attempt_errors(self, job_id: str) -> builtins.list[AttemptError]:
        """The errors of the row's counted failed attempts, oldest first: the newest
        ``ATTEMPT_ERRORS_KEPT``, each cut to ``ATTEMPT_ERROR_CHARS``. A hand-back (uncounted) is
        not an attempt and adds none; a retry keeps them (a later attempt 1 follows an earlier
        one). An unknown id: empty."""
        ...

    async def remove(self, job_id: str) -> bool:
        """Delete one job and its steps (when no other row shares the run: its ``run_id`` under
        its tenant). Running: refused."""
        ...

    async def requeue(self, job_id: str, *, from_step: str | None = None) -> JobRow:
        """Re-queue ONE finished job (``REQUEUEABLE_STATES``), due now; answers the moved row.

        Unknown id: ``X_JOB_NOT_FOUND``. Live row: ``X_JOB_NOT_REQUEUEABLE``. Its key held by
        another live row: ``X_JOB_DUPLICATE``. The row keeps its ``id`` and ``run_id`` (so its
        completed steps replay from storage), starts again at ``attempt`` 0 (a fresh attempt
        budget), keeps its ``claim`` counter (claims only grow, so no fence from before the
        requeue can match the new run), and clears ``last_error``, ``progress`` and
        ``finished_at``. ``from_step`` drops that step and every step saved after it (steps
        are sequential, so that is every step that started after it) of the row's own tenant's
        run, never another tenant's steps under the same ``run_id``; a name the run never saved
        drops nothing.
        """
        ...

    async def cancel(
        self, job_id: str, reason: str | None = None, *, detach_children: bool = False
    ) -> JobRow | None:
        """Cancel a live job; a finished (or unknown) one is left as it ended and answers None.

        Its live descendants (``run.step.enqueue``) are cancelled with it, except those
        enqueued ``detached=True`` (and theirs), or all of them with ``detach_children``.

        The row becomes ``cancelled`` at once with ``last_error`` ``"cancelled: <reason>"`` (or
        ``"cancelled"``) and frees its key. A RUNNING row keeps ``claimed_by``/``claim``: its
        worker's next heartbeat answers ``'cancelled'`` and its ack/nack answer False.
        """
        ...

    async def promote(self, job_id: str) -> JobRow:
        """A delayed row, or a ready one backing off, whose ``run_at`` is ahead: due now (ready).

        Unknown id: ``X_JOB_NOT_FOUND``; any other row: ``X_JOB_NOT_PROMOTABLE``.
        """
        ...

    async def requeue_many(self, flt: BulkFilter) -> BulkResult:
        """``requeue`` over a finished state (else ``X_JOB_NOT_REQUEUEABLE``), oldest first.

        A row whose key a live job holds stays and is not counted in ``remaining``; of several
        rows sharing one key only the oldest moves (the rest are then held). At most
        ``MAX_BULK_ROWS`` move per call.
        """
        ...

    async def remove_many(self, flt: BulkFilter) -> BulkResult:
        """Delete up to ``MAX_BULK_ROWS`` rows of any state but ``running``
        (``X_JOB_NOT_REMOVABLE``), oldest first; their steps go with the last row of a run (a
        ``run_id`` under one tenant)."""
        ...

    async def promote_many(self, flt: BulkFilter) -> BulkResult:
        """``promote`` over ``PROMOTABLE_STATES`` (else ``X_JOB_NOT_PROMOTABLE``); ``remaining``
        is the rows still waiting on their ``run_at``."""
        ...

    async def pause_queue(self, queue: str) -> None: ...

    async def resume_queue(self, queue: str) -> None: ...

    async def paused_queues(self) -> builtins.list[str]: ...

    async def queue_tenants(self, queue: str, now_ms: int, *, cap: int, top: int) -> QueueTenants:
        """Who the queue's due work belongs to: the first ``cap`` due rows in hand-out order,
        grouped by tenant (a bounded read however long the backlog), the ``top`` tenants by
        count. Jobs without a tenant are one group, ``tenant_id`` None."""
        ...

    async def pause_task(self, task: str) -> None: ...

    async def resume_task(self, task: str) -> None: ...

    async def paused_tasks(self) -> builtins.list[str]: ...

    async def workers(self) -> builtins.list[WorkerRow]: ...

    async def counters(self, job: str, since_ms: int) -> builtins.list[CounterBucket]: ...

    async def counter_totals(self, since_ms: int) -> builtins.list[CounterTotals]: ...

    async def rollup_counters(self) -> int:
        """Fold buckets past their tier into the next; answers the buckets folded."""
        ...

    async def record_progress(
        self, job_id: str, ref: ClaimRef, progress: JSONValue, *, force: bool = False
    ) -> bool:
        """What ``run.progress`` writes, fenced on the claim (False: not ours any more).

        At most one write per ``PROGRESS_INTERVAL_MS`` per run lands; ``force=True`` is the
        last value before the settle, written whatever the interval.
        """
        ...

    async def task_fires(self) -> builtins.list[TaskFire]:
        """Per task, its last recorded fire, by task name; at most ``MAX_TASK_FIRES`` rows."""
        ...

    async def record_task_fire(self, task: str, occurrence_ms: int) -> None:
        """Upsert the task's fire: the latest recorded one replaces the last, stamped now."""
        ...
