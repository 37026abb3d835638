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
    code = "X_INVARIANT"


class ConfigInvalidError(UltimateError):
    code = "X_CONFIG_INVALID"


class NotImplementedByDriverError(UltimateError):
    code = "X_NOT_IMPLEMENTED"


class InputInvalidError(UltimateError):
    """Input refused by a job's schema; ``meta["issues"]`` lists each failing field path."""

    code = "X_INPUT_INVALID"


class RateLimitedError(UltimateError):
    code = "X_RATE_LIMITED"


class OverloadedError(UltimateError):
    code = "X_OVERLOADED"


class OperationTimeoutError(UltimateError):
    code = "X_TIMEOUT"


# --- declarations and registry ------------------------------------------------------------


class IdempotencyRequiredError(UltimateError):
    code = "X_IDEMPOTENCY_REQUIRED"


class JobTenantRequiredError(UltimateError):
    code = "X_JOB_TENANT_REQUIRED"


class JobTenantMismatchError(UltimateError):
    code = "X_JOB_TENANT_MISMATCH"


class JobDeclarationInvalidError(UltimateError):
    code = "X_JOB_DECLARATION_INVALID"


class JobConcurrencyInvalidError(JobDeclarationInvalidError):
    code = "X_JOB_DECLARATION_INVALID"


class JobConcurrencyKeyInvalidError(JobDeclarationInvalidError):
    code = "X_JOB_DECLARATION_INVALID"


class TaskDeclarationInvalidError(UltimateError):
    code = "X_TASK_DECLARATION_INVALID"


class JobDuplicateError(UltimateError):
    code = "X_JOB_DUPLICATE"


class JobNameTakenError(JobDuplicateError):
    code = "X_JOB_DUPLICATE"


class JobUnknownError(UltimateError):
    code = "X_JOB_UNKNOWN"


class DriverUnavailableError(UltimateError):
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
    uncounted (a few times per row at most; ``shared.execution.outage``).
    """

    code = "X_DRIVER_UNREACHABLE"


class ActionJobUnbridgedError(UltimateError):
    code = "X_ACTION_JOB_UNBRIDGED"


class OutboxNoTxError(UltimateError):
    code = "X_OUTBOX_NO_TX"


# --- execution ----------------------------------------------------------------------------


class StepDuplicateError(UltimateError):
    code = "X_STEP_DUPLICATE"


class StepNotFoundError(UltimateError):
    """An operator named a step the run never recorded (``meta["recorded"]`` lists those)."""

    code = "X_STEP_NOT_FOUND"


class StepOutputInvalidError(UltimateError):
    """A step's result cannot be stored as JSON; failing loudly beats losing it on replay."""

    code = "X_STEP_OUTPUT_INVALID"


class JobAbortedError(UltimateError):
    code = "X_ABORTED"


class JobDrainedError(UltimateError):
    code = "X_DRAINING"


class JobTimeoutError(UltimateError):
    code = "X_JOB_TIMEOUT"


class JobMaxAttemptsError(UltimateError):
    code = "X_JOB_MAX_ATTEMPTS"


class LeaseLostError(UltimateError):
    code = "X_JOB_LEASE_LOST"


class JobSlotLostError(UltimateError):
    code = "X_JOB_SLOT_LOST"


class JobKeyBusyError(UltimateError):
    code = "X_JOB_KEY_BUSY"


class ConcurrencyUnenforceableError(UltimateError):
    code = "X_JOB_CONCURRENCY_UNENFORCEABLE"


class JobOnSettledFailedError(UltimateError):
    code = "X_JOB_ON_SETTLED_FAILED"


class JobRowStatusUnknownError(UltimateError):
    code = "X_JOB_ROW_STATUS_UNKNOWN"


class ClaimQueuesEmptyError(UltimateError):
    code = "X_JOB_CLAIM_QUEUES_EMPTY"


# --- the operator surface -----------------------------------------------------------------


class JobNotCancellableError(UltimateError):
    code = "X_JOB_NOT_CANCELLABLE"


class CancelUnsupportedError(JobNotCancellableError):
    code = "X_JOB_NOT_CANCELLABLE"


class JobNotFoundError(UltimateError):
    code = "X_JOB_NOT_FOUND"


class JobIdAmbiguousError(UltimateError):
    """A short id that starts more than one job's id (``meta["matches"]`` lists them)."""

    code = "X_JOB_ID_AMBIGUOUS"


class JobNotRequeueableError(UltimateError):
    code = "X_JOB_NOT_REQUEUEABLE"


class JobNotRemovableError(UltimateError):
    code = "X_JOB_NOT_REMOVABLE"


class JobNotPromotableError(UltimateError):
    code = "X_JOB_NOT_PROMOTABLE"


class JobPageInvalidError(UltimateError):
    code = "X_JOB_PAGE_INVALID"


# --- backfills ----------------------------------------------------------------------------


class BackfillAppliedError(UltimateError):
    code = "X_BACKFILL_APPLIED"


class BackfillEnvironmentError(UltimateError):
    code = "X_BACKFILL_ENVIRONMENT"


class BackfillMigrationPendingError(UltimateError):
    code = "X_BACKFILL_MIGRATION_PENDING"


class BackfillPendingError(UltimateError):
    code = "X_BACKFILL_PENDING"


class BackfillRunningError(UltimateError):
    code = "X_BACKFILL_RUNNING"


class BackfillStalledError(UltimateError):
    code = "X_BACKFILL_STALLED"


class BackfillUnknownError(UltimateError):
    code = "X_BACKFILL_UNKNOWN"


# --- exports and webhooks (raised by the families; declared here so codes stay one tree) ---


class ExportPartTooLargeError(UltimateError):
    code = "X_EXPORT_PART_TOO_LARGE"


class ExportRowInvalidError(UltimateError):
    code = "X_EXPORT_ROW_INVALID"


class ExportTenancyUndeclaredError(UltimateError):
    """A ``keyset()`` that says neither which column holds each row's tenant
    (``tenant_column=``) nor that its rows belong to no tenant (``tenant_free=True``), or says
    both: the library cannot apply the run's tenant to a read it knows nothing about."""

    code = "X_EXPORT_TENANCY_UNDECLARED"


class WebhookDeliveryFailedError(UltimateError):
    code = "X_WEBHOOK_DELIVERY_FAILED"


class WebhookDeliveryRejectedError(UltimateError):
    code = "X_WEBHOOK_DELIVERY_REJECTED"


class WebhookDeliveryThrottledError(UltimateError):
    code = "X_WEBHOOK_DELIVERY_THROTTLED"


class WebhookEndpointDisabledError(UltimateError):
    code = "X_WEBHOOK_ENDPOINT_DISABLED"


class WebhookEndpointInvalidError(UltimateError):
    code = "X_WEBHOOK_ENDPOINT_INVALID"


class WebhookEndpointUnknownError(UltimateError):
    code = "X_WEBHOOK_ENDPOINT_UNKNOWN"


class WebhookEventInvalidError(UltimateError):
    code = "X_WEBHOOK_EVENT_INVALID"


class WebhookEventUnknownError(UltimateError):
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
        "X_JOB_TENANT_MISMATCH": "terminal",
        "X_JOB_TENANT_REQUIRED": "terminal",
        "X_JOB_DECLARATION_INVALID": "terminal",
        "X_STEP_DUPLICATE": "terminal",
        "X_STEP_OUTPUT_INVALID": "terminal",
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
    code = "X_TENANCY_ACTOR_MISMATCH"


class JobInputUnparseableError(UltimateError):
    """The stored input no longer parses under the job's current schema (a deploy changed it).

    Unclassified on purpose: the attempt takes the ordinary retry path, because the next
    attempt may run on a worker whose code still accepts it.
    """

    code = "X_JOB_INPUT_UNPARSEABLE"
