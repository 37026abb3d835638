"""The driver contract: typed queue operations every backend implements the same way.

A driver speaks the domain (``claim(options) -> list[ClaimedJob]``), never "run this SQL", so
Postgres, Redis and memory can all stand behind it. What only some backends can do —
introspection, fleet leases, the worker registry, the backfill ledger, the keyspace mark
(``store_watch``) — are separate Protocols exposed as optional attributes
(``driver.introspect`` is None when absent); callers test the capability, never the driver's
name. ``tests/conformance/`` holds every driver to this file.

States: ``ready`` (due at ``run_at``), ``delayed`` (enqueued with a delay), ``running``
(claimed, leased), ``suspended`` (a ``step.sleep`` / ``wait_for_event`` parked it until
``run_at``), and the finished ``done``, ``failed``, ``dead``, ``cancelled``.

Attempts: ``attempt`` on a row is the number of the attempt last handed out. A claim adds one;
a nack with ``count=False`` (a suspension, a drain, a shed, a refusal) takes it back, so the
same attempt is presented again. An attempt whose worker died is never taken back: the lease
lapses and the next claim presents the next number, which is how a job that kills its worker
reaches the dead-letter queue after ``max_attempts`` claims.

The contract lives in four modules, all re-exported here so callers import from one place:
``records`` (states, limits and the messages of the core operations), ``operator_surface``
(``JobIntrospection`` and its rows), ``fleet`` (``LeaseStore``, ``WorkerRegistry``,
``BackfillLedger``) and this one (the ``JobDriver`` Protocol and the capability checks, among
them ``announces_enqueues`` and ``stores_in``, which see through any wrapper built on
``ujobs.drivers.delegating``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from ujobs.clock import Clock
from ujobs.drivers.fleet import (
    BackfillLedger,
    BackfillRow,
    BackfillStatus,
    LeaseStore,
    WorkerRegistry,
)
from ujobs.drivers.keyspace import StoreWatch
from ujobs.drivers.operator_surface import (
    ATTEMPT_ERROR_CHARS,
    ATTEMPT_ERRORS_KEPT,
    AttemptError,
    BulkFilter,
    BulkResult,
    CounterBucket,
    CounterTotals,
    JobFilter,
    JobIntrospection,
    JobPage,
    JobRow,
    QueueTenants,
    TaskFire,
    TenantBacklog,
    WorkerInfo,
    WorkerRow,
    job_cursor,
    parse_job_cursor,
    validate_job_filter,
)
from ujobs.drivers.records import (
    AHEAD_RETURNS_MAX,
    ALL_STATES,
    CLAIMABLE_STATES,
    COUNTER_TIERS,
    DEFAULT_JOB_PAGE,
    DEFAULT_PRIORITY,
    DEFAULT_QUEUE,
    DEFAULT_VISIBILITY_MS,
    LEASE_LAPSED_FINAL_ATTEMPT,
    LIVE_STATES,
    MAX_BULK_ROWS,
    MAX_JOB_PAGE,
    MAX_PRIORITY,
    MAX_QUEUE_CONTROL_MS,
    MAX_TASK_FIRES,
    MAX_WORKER_IN_FLIGHT,
    MIN_PRIORITY,
    PROGRESS_INTERVAL_MS,
    PROMOTABLE_STATES,
    REQUEUEABLE_STATES,
    ClaimedJob,
    ClaimOptions,
    ClaimRef,
    CounterKind,
    DriverStats,
    Enqueued,
    EnqueueRequest,
    ExhaustedJob,
    HeartbeatResult,
    JobState,
    JSONValue,
    NackOptions,
    NackTarget,
    OnExhausted,
    QueueStats,
    StepRecord,
    check_enqueue_request,
    check_priority,
    claim_of,
    nack_counter,
    nack_state,
    refuse_controls,
    slot_holder,
)
from ujobs.errors import NotImplementedByDriverError


@runtime_checkable
class JobDriver(Protocol):
    """The queue. Every operation is one round trip; settles answer whether they landed."""

    name: str
    clock: Clock

    async def enqueue(self, request: EnqueueRequest) -> Enqueued: ...

    async def enqueue_many(self, requests: Iterable[EnqueueRequest]) -> list[Enqueued]:
        """Queue N jobs in one operation, each still deduped by its id and live key."""
        ...

    async def claim(self, options: ClaimOptions) -> list[ClaimedJob]: ...

    async def ack(
        self,
        job_id: str,
        ref: ClaimRef,
        *,
        duration_ms: int | None = None,
        result: str | None = None,
        slot: str | None = None,
    ) -> bool:
        """Settle ``done``, storing ``result`` (the body's return value as encoded JSON text,
        ``ujobs.results``; None: no result) in the same write. False when the row is not
        ``running`` under ``ref``.

        ``slot``: the fleet slot (a ``leases`` key) the run holds under
        ``slot_holder(job_id, ref)``, released by this settle whether or not the row was
        still ours — in the settle's own write where the store allows (Postgres: the same
        statement, so a settle that fails keeps it), else through ``leases`` before the
        answer. Only that holder's slot is released. A driver without ``leases`` is never
        handed one."""
        ...

    async def nack(
        self, job_id: str, ref: ClaimRef, options: NackOptions, *, slot: str | None = None
    ) -> bool:
        """Settle per ``nack_state(options)``. False when not ``running`` under ``ref``.
        ``slot``: as ``ack``'s."""
        ...

    async def heartbeat(self, job_id: str, ref: ClaimRef, visibility_ms: int) -> HeartbeatResult:
        """Extend the lease to now + ``visibility_ms`` while still ``running`` under ``ref``."""
        ...

    async def start_ahead(self, job_id: str, ref: ClaimRef) -> bool:
        """A row claimed AHEAD (``ClaimedJob.ahead``) starts: from here a lapsed lease counts
        its attempt. False when the row is not ``running`` under ``ref`` (do not run it)."""
        ...

    async def load_steps(self, run_id: str, *, tenant_id: str | None) -> list[StepRecord]:
        """The completed steps of the run ``run_id`` OF ``tenant_id``, in the order they started.

        A ``runId`` is chosen by the caller (``POST /v1/jobs/{name}`` takes any), so it is a
        namespace of its tenant: the same ``run_id`` under two tenants is two runs that never
        read, replay or delete each other's steps, and tenant-less jobs (None) are a namespace
        of their own. The tenant is always the row's own (``ClaimedJob.tenant_id``,
        ``JobRow.tenant_id``), never a caller's claim."""
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
        """Persist one completed step; refused (False) unless the row is ours and running. The
        step is stored under the row's own tenant (read with the fence, no extra trip)."""
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

    @property
    def store_watch(self) -> StoreWatch | None:
        """The keyspace mark of a store that can come back empty (Redis); None elsewhere."""
        ...


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


@runtime_checkable
class AnnouncesEnqueues(Protocol):
    """A driver that tells this process's loops (and maybe others) about what it enqueued
    itself (``ujobs.wake.announce``): whoever enqueues around it need not."""

    def announce(self, queue: str, *, throttled: bool = True) -> None: ...


@runtime_checkable
class StoresIn(Protocol):
    """A driver whose rows live behind a database handle it can be asked about (the Postgres
    driver's pool), so a statement on that handle can write its rows in the same transaction."""

    def stores_in(self, executor: object) -> bool: ...


def announces_enqueues(driver: JobDriver) -> bool:
    """Whether ``driver`` announces its own enqueues (a capability, whatever wraps it)."""
    return isinstance(driver, AnnouncesEnqueues)


def stores_in(driver: JobDriver, executor: object) -> bool:
    """Whether ``driver``'s rows live behind ``executor`` (False when it cannot say)."""
    return isinstance(driver, StoresIn) and driver.stores_in(executor)


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


__all__ = [
    "AHEAD_RETURNS_MAX",
    "ALL_STATES",
    "ATTEMPT_ERRORS_KEPT",
    "ATTEMPT_ERROR_CHARS",
    "CLAIMABLE_STATES",
    "COUNTER_TIERS",
    "DEFAULT_JOB_PAGE",
    "DEFAULT_PRIORITY",
    "DEFAULT_QUEUE",
    "DEFAULT_VISIBILITY_MS",
    "LEASE_LAPSED_FINAL_ATTEMPT",
    "LIVE_STATES",
    "MAX_BULK_ROWS",
    "MAX_JOB_PAGE",
    "MAX_PRIORITY",
    "MAX_QUEUE_CONTROL_MS",
    "MAX_TASK_FIRES",
    "MAX_WORKER_IN_FLIGHT",
    "MIN_PRIORITY",
    "PROGRESS_INTERVAL_MS",
    "PROMOTABLE_STATES",
    "REQUEUEABLE_STATES",
    "AnnouncesEnqueues",
    "AttemptError",
    "BackfillLedger",
    "BackfillRow",
    "BackfillStatus",
    "BulkFilter",
    "BulkResult",
    "Capabilities",
    "ClaimOptions",
    "ClaimRef",
    "ClaimedJob",
    "CounterBucket",
    "CounterKind",
    "CounterTotals",
    "DriverStats",
    "EnqueueRequest",
    "Enqueued",
    "ExhaustedJob",
    "HeartbeatResult",
    "JSONValue",
    "JobDriver",
    "JobFilter",
    "JobIntrospection",
    "JobPage",
    "JobRow",
    "JobState",
    "LeaseStore",
    "NackOptions",
    "NackTarget",
    "OnExhausted",
    "QueueStats",
    "QueueTenants",
    "StepRecord",
    "StoreWatch",
    "StoresIn",
    "TaskFire",
    "TenantBacklog",
    "WorkerInfo",
    "WorkerRegistry",
    "WorkerRow",
    "announces_enqueues",
    "capabilities_of",
    "check_enqueue_request",
    "check_priority",
    "claim_of",
    "job_cursor",
    "nack_counter",
    "nack_state",
    "parse_job_cursor",
    "refuse_controls",
    "require_backfills",
    "require_introspection",
    "slot_holder",
    "stores_in",
    "validate_job_filter",
]
