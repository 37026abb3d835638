"""Every error the core raises, as one tree of codes.

Across a process, a wire or a job boundary the Python class is gone and the ``code`` is what
survives, so callers match on ``code``; the classes exist for ``except`` inside one process.
The retry classification table lives here too: it is keyed by code, because the worker that
reads it may be looking at an error rebuilt from a stored string.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

RetryClass = Literal["terminal", "retry-after", "retryable"]


class UltimateError(Exception):
    """Base of every error the project raises: a stable code, a sentence, and structured meta."""

    code: ClassVar[str] = "X_INTERNAL"

    def __init__(
        self, message: str, *, meta: Mapping[str, Any] | None = None, code: str | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.meta: dict[str, Any] = dict(meta or {})
        if code is not None:
            # An instance may carry a code other than its class default (an error rebuilt from
            # a stored row, or an app's own code on the base class).
            self.code = code  # type: ignore[misc]

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"

    def to_dict(self) -> dict[str, Any]:
        """The wire shape: ``{"code", "message", "meta"}``, as HTTP and ``--json`` print it."""
        return {"code": self.code, "message": self.message, "meta": self.meta}


def error_code_of(exc: BaseException) -> str | None:
    """The ``X_…`` code an exception carries, or None for anything that is not ours."""
    code = getattr(exc, "code", None)
    return code if isinstance(code, str) and code.startswith("X_") else None


# --- generic ------------------------------------------------------------------------------


class InvariantError(UltimateError):
    """A rule of the library's own API broken by its caller (a bad option, two targets under
    one name): a bug to fix in the calling code, never retried into success."""

    code = "X_INVARIANT"


class ConfigInvalidError(UltimateError):
    """A variable, flag or setting the process cannot run with; the message names it (a
    service stops at start)."""

    code = "X_CONFIG_INVALID"


class AppContextFailedError(UltimateError):
    """The app's ``define_api(context=)`` factory raised, or answered no async context manager,
    while a service opened it at start: the service stops before it claims any job."""

    code = "X_APP_CONTEXT_FAILED"


class NotImplementedByDriverError(UltimateError):
    """The operation needs something this driver does not have (the operator surface,
    ``onConflict: error`` on a batch: Postgres only)."""

    code = "X_NOT_IMPLEMENTED"


class InputInvalidError(UltimateError):
    """Input refused by a job's schema; ``meta["issues"]`` lists each failing field path."""

    code = "X_INPUT_INVALID"


class RateLimitedError(UltimateError):
    """Over the per-token rate (``UJOBS_API_RATE_PER_TOKEN``); wait ``Retry-After``
    (``meta.retryAfterMs`` on NATS)."""

    code = "X_RATE_LIMITED"


class OverloadedError(UltimateError):
    """The process is over its capacity for now; ask again after ``Retry-After``."""

    code = "X_OVERLOADED"


class OperationTimeoutError(UltimateError):
    code = "X_TIMEOUT"


# --- declarations and registry ------------------------------------------------------------


class IdempotencyRequiredError(UltimateError):
    """A job's idempotency key is missing (``None``) or over its length limit."""

    code = "X_IDEMPOTENCY_REQUIRED"


class JobTenantRequiredError(UltimateError):
    """A job's tenant is missing: declare ``tenant=`` (a function of the input, or
    ``"none"``)."""

    code = "X_JOB_TENANT_REQUIRED"


class JobTenantMismatchError(UltimateError):
    """The input names another tenant than the one the actor acts for: an actor queues work
    for its own tenant only."""

    code = "X_JOB_TENANT_MISMATCH"


class JobDeclarationInvalidError(UltimateError):
    """A ``@job`` declaration (or a queue, concurrency key or timeout in it) the library
    refuses; the message names the field."""

    code = "X_JOB_DECLARATION_INVALID"


class JobConcurrencyInvalidError(JobDeclarationInvalidError):
    code = "X_JOB_DECLARATION_INVALID"


class JobConcurrencyKeyInvalidError(JobDeclarationInvalidError):
    code = "X_JOB_DECLARATION_INVALID"


class TaskDeclarationInvalidError(UltimateError):
    """A ``@task`` declaration (its cron line, zone or catch-up) the library refuses."""

    code = "X_TASK_DECLARATION_INVALID"


class JobDuplicateError(UltimateError):
    """Two handles on one job name, or, with ``onConflict: error``, a live run already
    holding the job's idempotency key (``meta.id`` names it)."""

    code = "X_JOB_DUPLICATE"


class EnqueueOptionUnsupportedError(UltimateError):
    """An enqueue path that cannot honour ``debounce`` or ``unique_for`` (a batch under
    ``onConflict: error``, an enqueue staged in the outbox, a batch mixing requests with and
    without them): nothing was queued; enqueue those jobs alone."""

    code = "X_ENQUEUE_OPTION_UNSUPPORTED"


class PriorityInvalidError(UltimateError):
    """A priority that is not a whole number from 0 (handed out first, the default) to 9
    (last): nothing was queued; send one in that range, or none for the job's own."""

    code = "X_PRIORITY_INVALID"


class JobNameTakenError(JobDuplicateError):
    code = "X_JOB_DUPLICATE"


class JobUnknownError(UltimateError):
    """No job is registered under that name (an enqueue over HTTP or NATS, or a row
    ``drain`` claimed)."""

    code = "X_JOB_UNKNOWN"


class TaskUnknownError(UltimateError):
    """No task is declared under that name in the app (``POST /v1/tasks/{t}/pause``,
    ``ujobs tasks show``); the answer names the declared ones."""

    code = "X_TASK_UNKNOWN"


class DriverUnavailableError(UltimateError):
    """No usable store: no driver installed, ``DATABASE_URL`` unset, or the store refused;
    an operator has to act."""

    code = "X_DRIVER_UNAVAILABLE"


class SchemaOutdatedError(UltimateError):
    """The database's schema is missing, older or newer than the code's migrations: a service
    refuses to run on it (the message says to run ``ujobs db migrate``)."""

    code = "X_SCHEMA_OUTDATED"


class DriverUnreachableError(DriverUnavailableError):
    """A driver call could not reach its store: the connection was refused, reset or ended by
    the server (a restart, a failover, a crash), so the statement did not run or its answer was
    lost. Only the drivers raise it, translating their client's connection-class errors where
    they leave the driver; everything else the store answers keeps its own error.

    A subclass so ``except DriverUnavailableError`` still catches it; its own code so the
    worker can tell "the store was away" from everything else: a settle that fails with it is
    sent again while the lease lasts, and an attempt that fails with it is handed back
    uncounted (a few times per row at most; ``ujobs.execution.outage``).
    """

    code = "X_DRIVER_UNREACHABLE"


class OutboxNoTxError(UltimateError):
    """An enqueue outside a transaction where the outbox was installed with
    ``mode=\"required\"``."""

    code = "X_OUTBOX_NO_TX"


# --- execution ----------------------------------------------------------------------------


class StepDuplicateError(UltimateError):
    """A step name used twice in one run: step names are the replay key (add the loop index
    or the row id)."""

    code = "X_STEP_DUPLICATE"


class StepNotFoundError(UltimateError):
    """An operator named a step the run never recorded (``meta["recorded"]`` lists those)."""

    code = "X_STEP_NOT_FOUND"


class StepOutputInvalidError(UltimateError):
    """A step's result cannot be stored as JSON; failing loudly beats losing it on replay."""

    code = "X_STEP_OUTPUT_INVALID"


class ResultTooLargeError(UltimateError):
    """A job body returned a value whose JSON is over the stored result's limit
    (``UJOBS_RESULT_MAX_BYTES``, 256 KiB by default). Refused, never truncated: terminal, the
    attempt is dead-lettered (the same body returns the same value again). Store big outputs
    elsewhere and return their key."""

    code = "X_RESULT_TOO_LARGE"


class ResultInvalidError(UltimateError):
    """A job body returned a value JSON cannot store (an object, NaN, Infinity): terminal, as
    a step's ``X_STEP_OUTPUT_INVALID`` is."""

    code = "X_RESULT_INVALID"


class JobFailedError(UltimateError):
    """A result was asked of a job that ended without one (dead, failed or cancelled). The
    instance carries the job's own error code when its last error names one
    (``X_JOB_MAX_ATTEMPTS``, an app's code); ``meta`` has ``jobId``, ``name`` and ``state``."""

    code = "X_JOB_FAILED"


class ChildFailedError(UltimateError):
    """A child a parent waits for (``run.step.wait`` / ``gather``) ended dead, failed or
    cancelled. Its ``__cause__`` is the child's own failure (a ``JobFailedError`` carrying the
    child's code, as ``handle.result`` raises it); ``meta`` has ``childId``, ``name``, ``state``
    and ``childCode``. Terminal: retrying the parent meets the same ended child (retry the child
    first, then the parent)."""

    code = "X_CHILD_FAILED"


class DriverUnsupportedError(UltimateError):
    """The installed driver cannot do what the call needs, by design (children on the Redis
    driver, which keeps no index of a parent's rows): use the Postgres or memory driver."""

    code = "X_DRIVER_UNSUPPORTED"


class JobAbortedError(UltimateError):
    """The run's abort signal fired with no more specific reason (a backfill's throttle
    pause ending, say); the body should unwind."""

    code = "X_ABORTED"


class JobDrainedError(UltimateError):
    """The process is draining: it takes no new work (503 with ``Retry-After`` at the
    edges); the run is handed back uncounted."""

    code = "X_DRAINING"


class JobTimeoutError(UltimateError):
    """A job's ``timeout``, a step's ``step_timeout`` or a wait's timeout passed; retried by
    the backoff."""

    code = "X_JOB_TIMEOUT"


class JobMaxAttemptsError(UltimateError):
    """The job spent its last attempt; the last error follows as its cause, and the row is
    dead (or failed)."""

    code = "X_JOB_MAX_ATTEMPTS"


class LeaseLostError(UltimateError):
    """The worker's lease on the row lapsed (frozen past it, say): the attempt ends without
    saving another step."""

    code = "X_JOB_LEASE_LOST"


class JobSlotLostError(UltimateError):
    """The run lost its fleet-wide concurrency slot (it lapsed or was taken): stopped so the
    cap holds."""

    code = "X_JOB_SLOT_LOST"


class JobKeyBusyError(UltimateError):
    """Another run holds the concurrency key and the job declared ``when_busy=\"fail\"``:
    the body never ran."""

    code = "X_JOB_KEY_BUSY"


class JobSnoozeLimitError(UltimateError):
    """The run snoozed ``MAX_SNOOZES`` times already (``ujobs.jobs.snooze``): the next snooze
    dead-letters it instead of cycling for ever."""

    code = "X_JOB_SNOOZE_LIMIT"


class ConcurrencyUnenforceableError(UltimateError):
    """A fleet-wide concurrency limit on a driver without a lease store: run those jobs on a
    driver with leases."""

    code = "X_JOB_CONCURRENCY_UNENFORCEABLE"


class JobOnSettledFailedError(UltimateError):
    """The job's ``on_settled`` hook threw on every try; the row keeps its outcome."""

    code = "X_JOB_ON_SETTLED_FAILED"


class JobRowStatusUnknownError(UltimateError):
    """A job row read back in a state this version does not know (a newer release's migration
    widened the states and wrote one); ``meta["state"]`` names it."""

    code = "X_JOB_ROW_STATUS_UNKNOWN"


class ClaimQueuesEmptyError(UltimateError):
    """A claim named no queue."""

    code = "X_JOB_CLAIM_QUEUES_EMPTY"


# --- the operator surface -----------------------------------------------------------------


class JobNotCancellableError(UltimateError):
    """The job is not live (already finished), or the driver cannot cancel it."""

    code = "X_JOB_NOT_CANCELLABLE"


class CancelUnsupportedError(JobNotCancellableError):
    code = "X_JOB_NOT_CANCELLABLE"


class JobNotFoundError(UltimateError):
    """No job has that id (or it belongs to another tenant than the token's)."""

    code = "X_JOB_NOT_FOUND"


class JobIdAmbiguousError(UltimateError):
    """A short id that starts more than one job's id (``meta["matches"]`` lists them)."""

    code = "X_JOB_ID_AMBIGUOUS"


class JobNotRequeueableError(UltimateError):
    """A retry of a job that is still live: only a finished job (done, failed, dead,
    cancelled) is queued again."""

    code = "X_JOB_NOT_REQUEUEABLE"


class JobNotRemovableError(UltimateError):
    """A remove of a job that is running: it can be removed once it stops."""

    code = "X_JOB_NOT_REMOVABLE"


class JobNotPromotableError(UltimateError):
    """A promote of a job that is not waiting on its run time."""

    code = "X_JOB_NOT_PROMOTABLE"


class JobPageInvalidError(UltimateError):
    """A list's cursor (``after`` / ``before``) that no page produced, both cursors at once,
    or a limit out of range."""

    code = "X_JOB_PAGE_INVALID"


# --- backfills ----------------------------------------------------------------------------


class BackfillAppliedError(UltimateError):
    """The backfill already completed in this scope: add ``--force`` to sweep it again into
    a new ledger row."""

    code = "X_BACKFILL_APPLIED"


class BackfillEnvironmentError(UltimateError):
    """The backfill names ``environments=`` and ``UJOBS_ENVIRONMENT`` is not one of them (or
    unset)."""

    code = "X_BACKFILL_ENVIRONMENT"


class BackfillMigrationPendingError(UltimateError):
    """The backfill ``requires`` a migration the database has not applied yet."""

    code = "X_BACKFILL_MIGRATION_PENDING"


class BackfillPendingError(UltimateError):
    """A declared backfill has no completed pass in this environment (or its newest failed):
    what ``ujobs db backfill --pending`` exits 3 with, ``meta["pending"]`` naming them."""

    code = "X_BACKFILL_PENDING"


class BackfillRunningError(UltimateError):
    """``--force`` asked for a new sweep while a pass of the backfill is still live (queued or
    running): nothing was queued; force again once it ends."""

    code = "X_BACKFILL_RUNNING"


class BackfillStalledError(UltimateError):
    """The backfill's ``count`` is still above zero after its last page: the source ran out
    while rows remain."""

    code = "X_BACKFILL_STALLED"


class BackfillUnknownError(UltimateError):
    """No backfill is declared under that name."""

    code = "X_BACKFILL_UNKNOWN"


# --- exports and webhooks (raised by the families; declared here so codes stay one tree) ---


class ExportPartTooLargeError(UltimateError):
    """A part over the export's ``max_part_bytes``: lower its ``batch``."""

    code = "X_EXPORT_PART_TOO_LARGE"


class ExportRowInvalidError(UltimateError):
    """A ``row()`` key missing from the export's ``columns``, or ``copy=True`` on an export
    the COPY road cannot write."""

    code = "X_EXPORT_ROW_INVALID"


class ExportTenancyUndeclaredError(UltimateError):
    """A ``keyset()`` that says neither which column holds each row's tenant
    (``tenant_column=``) nor that its rows belong to no tenant (``tenant_free=True``), or says
    both: the library cannot apply the run's tenant to a read it knows nothing about."""

    code = "X_EXPORT_TENANCY_UNDECLARED"


class WebhookDeliveryFailedError(UltimateError):
    """A delivery got no 2xx: no answer, a timeout, a refused connection, a 3xx or another
    status; retried by the backoff."""

    code = "X_WEBHOOK_DELIVERY_FAILED"


class WebhookDeliveryRejectedError(UltimateError):
    """The endpoint answered 410 Gone: the delivery dead-letters and the endpoint is
    disabled."""

    code = "X_WEBHOOK_DELIVERY_REJECTED"


class WebhookDeliveryThrottledError(UltimateError):
    """The endpoint answered 429 or 503: the retry waits its ``Retry-After`` when it names
    one (at most an hour)."""

    code = "X_WEBHOOK_DELIVERY_THROTTLED"


class WebhookEndpointDisabledError(UltimateError):
    """A delivery to a disabled endpoint: it dead-letters at once; its events are kept for
    ``ujobs webhooks redeliver``."""

    code = "X_WEBHOOK_ENDPOINT_DISABLED"


class WebhookEndpointInvalidError(UltimateError):
    """An endpoint refused at registration or delivery: its URL (scheme, a refused address),
    a header, or an ``id`` a tenant token may not choose."""

    code = "X_WEBHOOK_ENDPOINT_INVALID"


class WebhookEndpointUnknownError(UltimateError):
    """No webhook endpoint has that id (or it belongs to another tenant than the token's)."""

    code = "X_WEBHOOK_ENDPOINT_UNKNOWN"


class WebhookEventInvalidError(UltimateError):
    """A webhook event or its signature headers that cannot be read (a timestamp that is not
    whole seconds, say)."""

    code = "X_WEBHOOK_EVENT_INVALID"


class WebhookEventUnknownError(UltimateError):
    """A delivery names an event that is not stored (never published, or purged)."""

    code = "X_WEBHOOK_EVENT_UNKNOWN"


# --- retry classification -----------------------------------------------------------------

_RETRY_CLASSES: frozenset[str] = frozenset({"terminal", "retry-after", "retryable"})
_retry_table: dict[str, RetryClass] = {}
_retry_lock = threading.Lock()


def register_error_retry(table: Mapping[str, RetryClass]) -> None:
    """Classify codes: ``terminal`` dead-letters at once, ``retry-after`` waits the stated time.

    Call it beside the module that declares the codes; that import is the registration.
    Re-registering a code with the same class is a no-op; with a different class it is
    ``X_INVARIANT``, because two modules disagreeing on one code is a bug to surface, not to
    resolve by import order.
    """
    for code, cls in table.items():
        if not isinstance(code, str) or not code.startswith("X_"):
            raise InvariantError(f"retry classification needs an X_ code, got {code!r}")
        if cls not in _RETRY_CLASSES:
            raise InvariantError(
                f"retry class for {code} must be one of terminal, retry-after, retryable; "
                f"got {cls!r}"
            )
    with _retry_lock:
        for code, cls in table.items():
            known = _retry_table.get(code)
            if known is not None and known != cls:
                raise InvariantError(
                    f"{code} is already classified {known!r}; refusing to reclassify it "
                    f"{cls!r} — classify each code once, beside the module that declares it",
                    meta={"code": code, "known": known, "asked": cls},
                )
        _retry_table.update(table)


def registered_retry(code: str | None) -> RetryClass | None:
    """The class a code was registered with, or None when nobody classified it."""
    if code is None:
        return None
    return _retry_table.get(code)


def retry_for(code: str | None) -> RetryClass:
    """The spec's ``retryFor``: a code's registered class, ``terminal`` for every code nobody
    classified (and for no code at all).

    The executor does NOT read this answer for unclassified codes (``retry_class_of`` keeps
    them on the attempt-count backoff path): answering ``terminal`` there would stop every
    transient retry in every app, which is the trap the spec warns of.
    """
    return registered_retry(code) or "terminal"


def retry_class_of(exc: BaseException) -> RetryClass:
    """How the queue treats a thrown error: its code's class, else the backoff path."""
    return registered_retry(error_code_of(exc)) or "retryable"


register_error_retry(
    {
        "X_INPUT_INVALID": "terminal",
        "X_JOB_KEY_BUSY": "terminal",
        "X_JOB_SNOOZE_LIMIT": "terminal",
        "X_ENQUEUE_OPTION_UNSUPPORTED": "terminal",
        "X_PRIORITY_INVALID": "terminal",
        "X_JOB_TENANT_MISMATCH": "terminal",
        "X_JOB_TENANT_REQUIRED": "terminal",
        "X_JOB_DECLARATION_INVALID": "terminal",
        "X_STEP_DUPLICATE": "terminal",
        "X_STEP_OUTPUT_INVALID": "terminal",
        "X_RESULT_TOO_LARGE": "terminal",
        "X_RESULT_INVALID": "terminal",
        "X_CHILD_FAILED": "terminal",
        "X_DRIVER_UNSUPPORTED": "terminal",
        "X_RATE_LIMITED": "retry-after",
        "X_OVERLOADED": "retry-after",
        "X_TIMEOUT": "retryable",
        "X_DRAINING": "retryable",
        "X_DRIVER_UNREACHABLE": "retryable",
        "X_JOB_TIMEOUT": "retryable",
        "X_ABORTED": "retryable",
    }
)


class TenancyActorOrgRequiredError(UltimateError):
    """A tenant-scoped read ran with no org in context (a ``tenant="none"`` job, say)."""

    code = "X_TENANCY_ACTOR_ORG_REQUIRED"


class TenancyActorMismatchError(UltimateError):
    """The row belongs to another tenant than the acting one."""

    code = "X_TENANCY_ACTOR_MISMATCH"


class JobInputUnparseableError(UltimateError):
    """The stored input no longer parses under the job's current schema (a deploy changed it).

    Unclassified on purpose: the attempt takes the ordinary retry path, because the next
    attempt may run on a worker whose code still accepts it.
    """

    code = "X_JOB_INPUT_UNPARSEABLE"
