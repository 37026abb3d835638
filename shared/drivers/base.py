"""The driver contract: typed queue operations every backend implements the same way.

A driver speaks the domain (``claim(options) -> list[ClaimedJob]``), never "run this SQL", so
Postgres, Redis and memory can all stand behind it. What only some backends can do —
introspection, fleet leases, the worker registry, the backfill ledger — are separate Protocols
exposed as optional attributes (``driver.introspect`` is None when absent); callers test the
capability, never the driver's name. ``tests/conformance/`` holds every driver to this file.

States: ``ready`` (due at ``run_at``), ``delayed`` (enqueued with a delay), ``running``
(claimed, leased), ``suspended`` (a ``step.sleep`` / ``wait_for_event`` parked it until
``run_at``), and the finished ``done``, ``failed``, ``dead``, ``cancelled``.

Attempts: ``attempt`` on a row is the number of the attempt last handed out. A claim adds one;
a nack with ``count=False`` (a suspension, a drain, a shed, a refusal) takes it back, so the
same attempt is presented again. An attempt whose worker died is never taken back: the lease
lapses and the next claim presents the next number, which is how a job that kills its worker
reaches the dead-letter queue after ``max_attempts`` claims.
"""

from __future__ import annotations

import base64
import builtins
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

import orjson

from shared.clock import Clock
from shared.errors import InvariantError, JobPageInvalidError, NotImplementedByDriverError

JSONValue = Any

JobState = Literal[
    "ready", "delayed", "running", "suspended", "done", "failed", "dead", "cancelled"
]
ALL_STATES: tuple[JobState, ...] = (
    "ready",
    "delayed",
    "running",
    "suspended",
    "done",
    "failed",
    "dead",
    "cancelled",
)
LIVE_STATES: tuple[JobState, ...] = ("ready", "delayed", "running", "suspended")
"""The states the one-live-run index covers: a key held here dedupes a new enqueue."""
REQUEUEABLE_STATES: tuple[JobState, ...] = ("done", "failed", "dead", "cancelled")
PROMOTABLE_STATES: tuple[JobState, ...] = ("delayed", "ready")
CLAIMABLE_STATES: tuple[JobState, ...] = ("ready", "delayed", "suspended")

DEFAULT_QUEUE = "default"
MAX_JOB_PAGE = 200
DEFAULT_JOB_PAGE = 100
MAX_BULK_ROWS = 1_000
MAX_WORKER_IN_FLIGHT = 100
MAX_TASK_FIRES = 1_000
PROGRESS_INTERVAL_MS = 1_000
DEFAULT_VISIBILITY_MS = 30_000
LEASE_LAPSED_FINAL_ATTEMPT = "LEASE_LAPSED_FINAL_ATTEMPT"

# (bucket width ms, how long buckets of this width are kept ms): 1-minute buckets for 24 h,
# 5-minute for 7 d, 1-hour for 30 d — 1,440 + 2,016 + 720 = 4,176 rows per job name at most.
COUNTER_TIERS: tuple[tuple[int, int], ...] = (
    (60_000, 86_400_000),
    (300_000, 7 * 86_400_000),
    (3_600_000, 30 * 86_400_000),
)
CounterKind = Literal["done", "retried", "failed", "dead"]


# --- enqueue --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EnqueueRequest:
    """One job to queue. ``id`` / ``run_id`` are minted by the driver when None.

    An ``id`` that already names a row — live or finished — inserts nothing and answers that
    row (``deduped=True``): an outbox republish meets the job the first publish made. A live
    row holding ``(name, tenant_id, idempotency_key)`` dedupes too.
    """

    name: str
    input: JSONValue
    idempotency_key: str
    queue: str = DEFAULT_QUEUE
    tenant_id: str | None = None
    max_attempts: int = 3
    run_at_ms: int | None = None
    id: str | None = None
    run_id: str | None = None
    traceparent: str | None = None
    enqueued_by: str | None = None


def check_enqueue_request(request: EnqueueRequest) -> None:
    """Refuse a request no driver can store (``X_INVARIANT``), before anything is inserted.

    Every driver runs it over a whole ``enqueue_many`` batch first, so a bad request inserts
    nothing, as one statement in Postgres is all or nothing.
    """
    if not isinstance(request.name, str) or not request.name:
        raise InvariantError("an enqueue needs a job name", meta={"name": request.name})
    if not isinstance(request.queue, str) or not request.queue:
        raise InvariantError("an enqueue needs a queue name", meta={"queue": request.queue})
    if not isinstance(request.idempotency_key, str):
        raise InvariantError(
            "idempotency_key must be a string", meta={"key": repr(request.idempotency_key)}
        )
    if isinstance(request.max_attempts, bool) or request.max_attempts < 1:
        raise InvariantError(
            "max_attempts must be at least 1", meta={"max_attempts": request.max_attempts}
        )


@dataclass(frozen=True, slots=True)
class Enqueued:
    """What an enqueue answers: the job's own ids on every path, and whether it deduped."""

    id: str
    run_id: str
    deduped: bool


# --- claim ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ClaimRef:
    """The fence every settle, renewal and step write carries: who claimed, and which claim."""

    worker_id: str
    claim: int


@dataclass(frozen=True, slots=True)
class ClaimedJob:
    id: str
    run_id: str
    name: str
    queue: str
    input: JSONValue
    tenant_id: str | None
    idempotency_key: str
    attempt: int
    max_attempts: int
    worker_id: str
    claim: int
    run_at_ms: int
    created_at_ms: int
    lease_expires_at_ms: int
    traceparent: str | None = None
    enqueued_by: str | None = None

    @property
    def ref(self) -> ClaimRef:
        return ClaimRef(self.worker_id, self.claim)


def claim_of(job: ClaimedJob) -> ClaimRef:
    """The ``{worker_id, claim}`` a claimed job's settles are fenced on."""
    return ClaimRef(job.worker_id, job.claim)


@dataclass(frozen=True, slots=True)
class ExhaustedJob:
    """A row the claim buried: its lease lapsed on its final attempt (``state`` dead or failed)."""

    id: str
    run_id: str
    name: str
    queue: str
    input: JSONValue
    tenant_id: str | None
    attempt: int
    max_attempts: int
    state: Literal["dead", "failed"]
    last_error: str = LEASE_LAPSED_FINAL_ATTEMPT


OnExhausted = Callable[[Sequence[ExhaustedJob]], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class ClaimOptions:
    """One claim: up to ``limit`` due rows of ``queues``, leased for ``visibility_ms``.

    Rows of a paused queue are never handed out. A ``running`` row whose lease lapsed is taken
    again — unless it is at its final attempt, in which case it is buried (``dead``, or
    ``failed`` when its job name is in ``drop_exhausted``) and reported once through
    ``on_exhausted``.
    """

    queues: Sequence[str]
    limit: int
    worker_id: str
    visibility_ms: int = DEFAULT_VISIBILITY_MS
    on_exhausted: OnExhausted | None = None
    drop_exhausted: frozenset[str] = frozenset()


# --- settle ---------------------------------------------------------------------------------

NackTarget = Literal["dead", "failed", "suspended", "ready"]


@dataclass(frozen=True, slots=True)
class NackOptions:
    """How a nack leaves the row; ``nack_state()`` turns these into the target state.

    ``count=False`` hands the attempt back (the same number is presented again) and moves no
    counter — except a refusal (``fail`` uncounted), which counts ``failed``.
    """

    error: str | None = None
    run_at_ms: int | None = None
    count: bool = True
    dead_letter: bool = False
    fail: bool = False
    park: bool = False
    duration_ms: int | None = None


def nack_state(options: NackOptions) -> NackTarget:
    """The state a nack moves the row to; the one decision every driver shares."""
    if options.dead_letter:
        return "dead"
    if options.fail:
        return "failed"
    if options.park:
        return "suspended"
    return "ready"


def nack_counter(options: NackOptions) -> CounterKind | None:
    """Which counter a nack moves in the statement that settles the row, if any."""
    target = nack_state(options)
    if target == "dead":
        return "dead"
    if target == "failed":
        return "failed"
    if target == "ready" and options.count:
        return "retried"
    return None


HeartbeatResult = Literal["renewed", "cancelled", "lost"]
"""``cancelled``: cancelled under us. ``lost``: another claim holds the row, or it is gone."""


@dataclass(frozen=True, slots=True)
class StepRecord:
    """A completed step: its output replays instead of running again."""

    name: str
    output: JSONValue
    seq: int
    started_at_ms: int
    finished_at_ms: int


@dataclass(frozen=True, slots=True)
class QueueStats:
    queue: str
    ready: int = 0
    delayed: int = 0
    running: int = 0
    suspended: int = 0
    done: int = 0
    failed: int = 0
    dead: int = 0
    cancelled: int = 0
    due: int = 0
    oldest_due_run_at_ms: int | None = None
    paused: bool = False


@dataclass(frozen=True, slots=True)
class DriverStats:
    queues: Mapping[str, QueueStats]


@runtime_checkable
class JobDriver(Protocol):
    """The queue. Every operation is one round trip; settles answer whether they landed."""

    name: str
    clock: Clock

    async def enqueue(self, request: EnqueueRequest) -> Enqueued: ...

    async def enqueue_many(self, requests: Sequence[EnqueueRequest]) -> list[Enqueued]:
        """Queue N jobs in one operation, each still deduped by its id and live key."""
        ...

    async def claim(self, options: ClaimOptions) -> list[ClaimedJob]: ...

    async def ack(self, job_id: str, ref: ClaimRef, *, duration_ms: int | None = None) -> bool:
        """Settle ``done``. False when the row is not ``running`` under ``ref``."""
        ...

    async def nack(self, job_id: str, ref: ClaimRef, options: NackOptions) -> bool:
        """Settle per ``nack_state(options)``. False when not ``running`` under ``ref``."""
        ...

    async def heartbeat(self, job_id: str, ref: ClaimRef, visibility_ms: int) -> HeartbeatResult:
        """Extend the lease to now + ``visibility_ms`` while still ``running`` under ``ref``."""
        ...

    async def load_steps(self, run_id: str) -> list[StepRecord]:
        """The completed steps of a run, in the order they started."""
        ...

    async def save_step(
        self,
        job_id: str,
        ref: ClaimRef,
        run_id: str,
        name: str,
        output: JSONValue,
        *,
        started_at_ms: int,
    ) -> bool:
        """Persist one completed step; refused (False) unless the row is ours and running."""
        ...

    async def stats(self) -> DriverStats: ...

    async def close(self) -> None: ...

    @property
    def introspect(self) -> JobIntrospection | None: ...

    @property
    def leases(self) -> LeaseStore | None: ...

    @property
    def workers(self) -> WorkerRegistry | None: ...

    @property
    def backfills(self) -> BackfillLedger | None: ...


# --- the operator surface -------------------------------------------------------------------


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

    async def remove(self, job_id: str) -> bool:
        """Delete one job and its steps (when no other row shares the run). Running: refused."""
        ...

    async def requeue(self, job_id: str, *, from_step: str | None = None) -> JobRow:
        """Re-queue ONE finished job (``REQUEUEABLE_STATES``), due now; answers the moved row.

        Unknown id: ``X_JOB_NOT_FOUND``. Live row: ``X_JOB_NOT_REQUEUEABLE``. Its key held by
        another live row: ``X_JOB_DUPLICATE``. The row keeps its ``id`` and ``run_id`` (so its
        completed steps replay from storage), starts again at ``attempt`` 0 (a fresh attempt
        budget), keeps its ``claim`` counter (claims only grow, so no fence from before the
        requeue can match the new run), and clears ``last_error``, ``progress`` and
        ``finished_at``. ``from_step`` drops that step and every step saved after it (steps
        are sequential, so that is every step that started after it); a name the run never
        saved drops nothing.
        """
        ...

    async def cancel(self, job_id: str, reason: str | None = None) -> JobRow | None:
        """Cancel a live job; a finished (or unknown) one is left as it ended and answers None.

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
        (``X_JOB_NOT_REMOVABLE``), oldest first; their steps go with the last row of a run."""
        ...

    async def promote_many(self, flt: BulkFilter) -> BulkResult:
        """``promote`` over ``PROMOTABLE_STATES`` (else ``X_JOB_NOT_PROMOTABLE``); ``remaining``
        is the rows still waiting on their ``run_at``."""
        ...

    async def pause_queue(self, queue: str) -> None: ...

    async def resume_queue(self, queue: str) -> None: ...

    async def paused_queues(self) -> builtins.list[str]: ...

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


@runtime_checkable
class LeaseStore(Protocol):
    """Fleet-wide slots: at most ``limit`` live holders per key, each expiring after its TTL.

    Slots are numbered from 0 per key; an acquire takes the lowest free number, and a slot whose
    TTL passed is free again with no cleanup call (a SIGKILLed holder's slot comes back).
    """

    async def acquire(self, key: str, holder: str, limit: int, ttl_ms: int) -> bool:
        """Take a slot while fewer than ``limit`` live holders share ``key``. A holder that
        already holds one keeps it (TTL renewed) and answers True — never two slots."""
        ...

    async def renew(self, key: str, holder: str, ttl_ms: int) -> bool:
        """Extend ``holder``'s live slot to now + ``ttl_ms``; False when it lapsed or was
        released (the slot may be someone else's now)."""
        ...

    async def release(self, key: str, holder: str) -> None: ...

    async def holders(self, key: str) -> builtins.list[str]:
        """The live holders of ``key``, in slot-number order."""
        ...


@runtime_checkable
class WorkerRegistry(Protocol):
    """The worker rows ``workers()`` reads; a row expires ``ttl_ms`` after its last beat.

    ``in_flight`` keeps at most ``MAX_WORKER_IN_FLIGHT`` ids. ``workers()`` lists the live rows
    oldest worker first (``started_at_ms``, then id).
    """

    async def beat(
        self, info: WorkerInfo, in_flight: Sequence[str], ttl_ms: int, *, draining: bool = False
    ) -> None:
        """Upsert the row. The first beat with ``draining`` stamps ``draining_at`` for good."""
        ...

    async def remove(self, worker_id: str) -> None: ...


BackfillStatus = Literal["running", "completed", "failed"]


@dataclass(frozen=True, slots=True)
class BackfillRow:
    name: str
    run_id: str
    checksum: str
    status: BackfillStatus
    app_version: str | None
    rows_processed: int
    last_cursor: JSONValue
    started_at_ms: int
    completed_at_ms: int | None = None
    error: str | None = None


@runtime_checkable
class BackfillLedger(Protocol):
    """One row per backfill pass: what has been swept (the twin of the migrations table)."""

    async def begin(
        self, name: str, run_id: str, checksum: str, app_version: str | None
    ) -> BackfillRow:
        """Adopt this run's row, or start one; a retry keeps its ``started_at``."""
        ...

    async def progress(self, name: str, run_id: str, rows: int, cursor: JSONValue) -> None: ...

    async def finish(
        self, name: str, run_id: str, status: BackfillStatus, error: str | None = None
    ) -> None: ...

    async def list(
        self, *, name: str | None = None, status: BackfillStatus | None = None, limit: int = 100
    ) -> builtins.list[BackfillRow]: ...

    async def latest_completed(self, name: str) -> BackfillRow | None: ...


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What a driver carries beyond the core operations, for callers that branch on it."""

    introspect: bool = False
    leases: bool = False
    workers: bool = False
    backfills: bool = False
    extra: Mapping[str, bool] = field(default_factory=dict)


def capabilities_of(driver: JobDriver) -> Capabilities:
    return Capabilities(
        introspect=driver.introspect is not None,
        leases=driver.leases is not None,
        workers=driver.workers is not None,
        backfills=driver.backfills is not None,
    )


_DRIVER_TITLES = {"postgres": "Postgres", "redis": "Redis", "memory": "memory"}


def require_introspection(driver: JobDriver) -> JobIntrospection:
    """The driver's operator surface, or ``X_NOT_IMPLEMENTED`` saying which driver has one.

    Every operator command (``ujobs jobs show/retry/cancel``, queue pauses, the api's job
    routes) goes through here, so a deployment on a driver without an index of its rows (Redis)
    gets one sentence that names the fix instead of an AttributeError.
    """
    introspect = driver.introspect
    if introspect is None:
        title = _DRIVER_TITLES.get(driver.name, driver.name)
        raise NotImplementedByDriverError(
            f"queue introspection needs the Postgres driver; the {title} driver keeps no "
            "operator index",
            meta={"driver": driver.name, "capability": "introspect"},
        )
    return introspect


def require_backfills(driver: JobDriver) -> BackfillLedger:
    """The driver's backfill ledger, or ``X_NOT_IMPLEMENTED`` naming the Postgres driver."""
    ledger = driver.backfills
    if ledger is None:
        title = _DRIVER_TITLES.get(driver.name, driver.name)
        raise NotImplementedByDriverError(
            f"backfills need the Postgres driver; the {title} driver keeps no backfill ledger",
            meta={"driver": driver.name, "capability": "backfills"},
        )
    return ledger
