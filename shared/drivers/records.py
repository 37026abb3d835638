"""The values a driver takes and answers: job states, the limits, and the messages of the core
operations (enqueue, claim, settle, heartbeat, steps, stats).

Split out of ``ujobs.drivers.base`` (which re-exports every name here) so the contract's data
and its Protocols read separately; the rules for states and attempts are in that module's
docstring.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import quote

from ujobs.durations import Duration
from ujobs.errors import EnqueueOptionUnsupportedError, InvariantError, PriorityInvalidError
from ujobs.execution.frozen_init import slot_init

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


@slot_init  # a batch enqueue builds hundreds: see ujobs.execution.frozen_init
@dataclass(frozen=True, slots=True)
class EnqueueRequest:
    """One job to queue. ``id`` / ``run_id`` are minted by the driver when None.

    An ``id`` that already names a row — live or finished — inserts nothing and answers that
    row (``deduped=True``): an outbox republish meets the job the first publish made. A live
    row holding ``(name, tenant_id, idempotency_key)`` dedupes too.

    ``debounce_ms``: the run is due at the later of ``run_at_ms`` (or now) and now +
    ``debounce_ms``; a run holding the key that was never claimed yet (``ready``/``delayed``,
    claim 0) is not answered deduped but moved: it takes this due time and this input
    (``debounced=True``). A key whose run has started (running, suspended, a retry or a snooze
    waiting) dedupes as without it. ``unique_for_ms``: the key is held by a ``done`` run
    enqueued with ``unique_for_ms`` that finished within the last ``unique_for_ms`` too (this
    request's period): that run is answered, deduped.

    ``debounce_seq``: the request's place in its producer's order (the NATS edge gives a
    stream message's sequence). A debounce whose seq is not above the one the waiting run
    last took moves nothing and is answered deduped, so a message delivered again after a
    newer one of its key never puts its older input back. None (every other edge): it moves
    the run as above; the run keeps the highest seq it took.

    ``priority``: ``MIN_PRIORITY`` (0, the default, handed out first) to ``MAX_PRIORITY`` (9).
    A claim hands out due rows by (priority, run_at, seq) across all the queues it takes from.
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
    debounce_ms: int | None = None
    unique_for_ms: int | None = None
    priority: int = 0
    slot_key: str | None = None
    """The fleet slot's lease key (``job.concurrency``), computed from the input at enqueue by
    ``JobHandle.request``; a driver that can take the slot in its claim stores it (Postgres),
    the others ignore it. None: no concurrency, or not known (the worker computes it)."""
    debounce_seq: int | None = None

    @property
    def stored_debounce_seq(self) -> int | None:
        """The ``debounce_seq`` a driver stores on the row and compares: only a request that
        debounces carries one (a plain enqueue has no order to keep; Postgres's batch COPY has
        no column for it)."""
        return self.debounce_seq if self.debounce_ms is not None else None

    @property
    def controlled(self) -> bool:
        """Whether it carries ``debounce_ms`` or ``unique_for_ms`` (the statements that honour
        them differ on Postgres)."""
        return self.debounce_ms is not None or self.unique_for_ms is not None


MAX_QUEUE_CONTROL_MS = 366 * 86_400_000
"""The longest ``debounce`` or ``unique_for``: a year."""

MAX_DEBOUNCE_SEQ = 2**53 - 1
"""The largest ``debounce_seq``: every driver stores it exactly (a Redis script reads numbers
as doubles)."""

MIN_PRIORITY = 0
"""The first priority handed out, and every job's default."""
MAX_PRIORITY = 9
"""The last priority handed out."""
DEFAULT_PRIORITY = MIN_PRIORITY


def check_priority(value: object, *, field: str = "priority") -> int:
    """``value`` when it is an int from ``MIN_PRIORITY`` to ``MAX_PRIORITY``, else
    ``X_PRIORITY_INVALID`` naming ``field`` (a bool is no priority)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise PriorityInvalidError(
            f"{field} must be a whole number from {MIN_PRIORITY} (first) to {MAX_PRIORITY}, "
            f"got {type(value).__name__}",
            meta={"field": field, "min": MIN_PRIORITY, "max": MAX_PRIORITY},
        )
    if not MIN_PRIORITY <= value <= MAX_PRIORITY:
        raise PriorityInvalidError(
            f"{field} must be from {MIN_PRIORITY} (first) to {MAX_PRIORITY}, got {value}",
            meta={"field": field, "priority": value, "min": MIN_PRIORITY, "max": MAX_PRIORITY},
        )
    return value


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
    if type(request.priority) is not int or not MIN_PRIORITY <= request.priority <= MAX_PRIORITY:
        check_priority(request.priority)  # raises, naming what is wrong
    if request.debounce_ms is None and request.unique_for_ms is None:
        return  # most requests: neither control, nothing more to check
    for field_name, value in (
        ("debounce_ms", request.debounce_ms),
        ("unique_for_ms", request.unique_for_ms),
    ):
        if value is not None and (
            isinstance(value, bool)
            or not isinstance(value, int)
            or not 1 <= value <= MAX_QUEUE_CONTROL_MS
        ):
            raise InvariantError(
                f"{field_name} must be between 1 ms and a year",
                meta={field_name: repr(value), "max": MAX_QUEUE_CONTROL_MS},
            )
    seq = request.debounce_seq
    if seq is not None and (
        isinstance(seq, bool) or not isinstance(seq, int) or not 0 <= seq <= MAX_DEBOUNCE_SEQ
    ):
        raise InvariantError(
            "debounce_seq must be a whole number from 0 to 2**53 - 1",
            meta={"debounce_seq": repr(seq)},
        )


def refuse_controls(requests: Sequence[EnqueueRequest], path: str) -> None:
    """``X_ENQUEUE_OPTION_UNSUPPORTED`` when a request of ``requests`` carries ``debounce_ms``
    or ``unique_for_ms``, which ``path`` cannot honour (nothing was queued)."""
    for index, request in enumerate(requests):
        if request.controlled:
            raise EnqueueOptionUnsupportedError(
                f"{path} cannot honour debounce or unique_for (job {request.name!r}); "
                "enqueue that job on its own",
                meta={"job": request.name, "index": index, "path": path},
            )


@slot_init  # a batch enqueue answers hundreds per call
@dataclass(frozen=True, slots=True)
class Enqueued:
    """What an enqueue answers: the job's own ids on every path, and whether it deduped.

    ``debounced``: a run that had not started yet held the key and this enqueue moved it
    (its start and input: ``EnqueueRequest.debounce_ms``); ``deduped`` is then True too, as no
    new run was made."""

    id: str
    run_id: str
    deduped: bool
    debounced: bool = False

    async def result(self, *, timeout: Duration) -> Any:
        """The job's result once it settles, through the installed driver (raises its failure
        with its code, or ``X_TIMEOUT``): ``ujobs.jobs.result_read``."""
        # Imported here: the jobs layer sits above this module, which every driver imports.
        from ujobs.jobs.result_read import job_result

        return await job_result(self.id, timeout=timeout)


# --- claim ----------------------------------------------------------------------------------


@slot_init  # built per claimed row and per settle: see ujobs.execution.frozen_init
@dataclass(frozen=True, slots=True)
class ClaimRef:
    """The fence every settle, renewal and step write carries: who claimed, and which claim."""

    worker_id: str
    claim: int


@slot_init  # one per claimed row
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
    store_epoch: str | None = None
    """The keyspace mark the row was claimed under, on a store that can lose its whole
    keyspace under a running worker (``StoreWatch``: Redis); None elsewhere."""
    ahead: bool = False
    """Claimed AHEAD of a free slot (``ClaimOptions.ahead_after``): its attempt is counted, but
    until ``start_ahead`` lands it is not started, and a lease that lapses gives it back
    uncounted."""
    snoozes: int = 0
    """The times this run snoozed before this claim (``ujobs.jobs.snooze``; a requeue resets it)."""
    priority: int = 0
    """0 (first) to 9: the order the claim handed it out in (``EnqueueRequest.priority``)."""
    slot: str | None = None
    """The fleet slot (a lease key) this run holds, under ``slot_holder(id, ref)``: as the
    claim answers, the one the claim itself took (``ClaimOptions.slots``; None: the worker
    takes it, if any); the worker sets it to the slot the run ends holding, and the run's
    settle releases it (``JobDriver.ack`` / ``nack`` ``slot``)."""

    @property
    def ref(self) -> ClaimRef:
        return ClaimRef(self.worker_id, self.claim)


def claim_of(job: ClaimedJob) -> ClaimRef:
    """The ``{worker_id, claim}`` a claimed job's settles are fenced on."""
    return ClaimRef(job.worker_id, job.claim)


def slot_holder(job_id: str, ref: ClaimRef) -> str:
    """``<percent-encoded job id>#<claim>@<worker id>``: the holder id of a run's fleet slot in
    the lease store. It names the job and its claim, so the settle of that claim releases
    exactly its own slot (never another holder's on the same key), and a run can tell its
    own earlier claim's leftover slot from another run's (``ujobs.worker.concurrency``)."""
    return f"{quote(job_id, safe='')}#{ref.claim}@{ref.worker_id}"


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


AHEAD_RETURNS_MAX = 3
"""How many times a lapsed row claimed ahead is handed out again uncounted (``ClaimOptions
.ahead_after``); past it a lapse counts. The cap matters only for a body that kills its worker
before its ``start_ahead`` landed (a poison pill started from the buffer)."""


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
    ahead_after: int | None = None
    """None: every row is started at once. A number: the rows after the first ``ahead_after``
    (in hand-out order) are claimed AHEAD (``ClaimedJob.ahead``) — a worker's claim-ahead
    buffer. An ahead row's attempt is counted like any other, but until ``start_ahead`` lands
    for it, a lease that lapses hands it out again with the SAME attempt (never buried), at
    most ``AHEAD_RETURNS_MAX`` times per row: a row that never started costs its job nothing
    when its worker dies."""
    strict_queues: frozenset[str] = frozenset()
    """Queues served first-in first-out (``fair=False``, ``UJOBS_STRICT_QUEUES``); every other
    queue is tenant-fair (``ujobs.drivers.fairness``)."""
    slots: tuple[tuple[str, int], ...] = ()
    """``(job name, limit)`` of the jobs declared with ``concurrency`` whose fleet slot the
    claim may take in its own statement (``ClaimedJob.slot``): a driver that can (Postgres, for
    a row whose key was stored at enqueue) does, under the lease store's rules; any other row,
    and every row of a driver that cannot, is answered with ``slot=None``."""
    slots_wait: frozenset[str] = frozenset()
    """Those of ``slots``' jobs whose busy key waits (a plain cap, ``when_busy='wait'``): a
    driver that takes slots in the claim leaves a row of theirs unclaimed when its key has no
    room, where the worker would only hand it back; a ``when_busy='fail'`` row is still handed
    out, to be refused."""


# --- settle ---------------------------------------------------------------------------------

NackTarget = Literal["dead", "failed", "suspended", "ready"]


@dataclass(frozen=True, slots=True)
class NackOptions:
    """How a nack leaves the row; ``nack_state()`` turns these into the target state.

    ``count=False`` hands the attempt back (the same number is presented again) and moves no
    counter — except a refusal (``fail`` uncounted), which counts ``failed``.

    ``unreachable_cap`` marks an OUTAGE hand-back (an attempt that failed only because the
    driver could not reach its store): it lands only while the row was handed back that way
    fewer than ``unreachable_cap`` times, and adds one to that tally. At the cap the nack
    answers False and changes nothing — the caller then sends the ordinary, counted verdict —
    so no row loops uncounted for ever.
    """

    error: str | None = None
    run_at_ms: int | None = None
    count: bool = True
    dead_letter: bool = False
    fail: bool = False
    park: bool = False
    duration_ms: int | None = None
    unreachable_cap: int | None = None
    snooze: bool = False
    """A snooze (``count=False`` with a ``run_at_ms``): adds one to the row's ``snoozes``."""


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
    # The figures that are lower bounds, not exact: a driver that bounds its read's cost (the
    # Postgres one, ``QUEUE_COUNT_CAP``) names here the states (and ``due``) it stopped counting.
    capped: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class DriverStats:
    queues: Mapping[str, QueueStats]
