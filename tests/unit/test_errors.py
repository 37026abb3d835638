"""§ Errors: every class the spec lists carries its code; the retry classification table."""

from __future__ import annotations

import uuid

import pytest

from ujobs import errors
from ujobs.errors import (
    InvariantError,
    UltimateError,
    error_code_of,
    register_error_retry,
    registered_retry,
    retry_class_of,
    retry_for,
)

# The spec's § Error classes table, verbatim (class -> code), less the codes the errors page's
# deviations section names (docs.gen_reference.SPEC_CODES_NOT_KEPT).
SPEC_CLASSES = {
    "BackfillAppliedError": "X_BACKFILL_APPLIED",
    "BackfillEnvironmentError": "X_BACKFILL_ENVIRONMENT",
    "BackfillMigrationPendingError": "X_BACKFILL_MIGRATION_PENDING",
    "BackfillPendingError": "X_BACKFILL_PENDING",
    "BackfillRunningError": "X_BACKFILL_RUNNING",
    "BackfillStalledError": "X_BACKFILL_STALLED",
    "BackfillUnknownError": "X_BACKFILL_UNKNOWN",
    "CancelUnsupportedError": "X_JOB_NOT_CANCELLABLE",
    "ClaimQueuesEmptyError": "X_JOB_CLAIM_QUEUES_EMPTY",
    "ConcurrencyUnenforceableError": "X_JOB_CONCURRENCY_UNENFORCEABLE",
    "DriverUnavailableError": "X_DRIVER_UNAVAILABLE",
    "ExportPartTooLargeError": "X_EXPORT_PART_TOO_LARGE",
    "ExportRowInvalidError": "X_EXPORT_ROW_INVALID",
    "IdempotencyRequiredError": "X_IDEMPOTENCY_REQUIRED",
    "JobAbortedError": "X_ABORTED",
    "JobConcurrencyInvalidError": "X_JOB_DECLARATION_INVALID",
    "JobConcurrencyKeyInvalidError": "X_JOB_DECLARATION_INVALID",
    "JobDeclarationInvalidError": "X_JOB_DECLARATION_INVALID",
    "JobDrainedError": "X_DRAINING",
    "JobDuplicateError": "X_JOB_DUPLICATE",
    "JobKeyBusyError": "X_JOB_KEY_BUSY",
    "JobMaxAttemptsError": "X_JOB_MAX_ATTEMPTS",
    "JobNameTakenError": "X_JOB_DUPLICATE",
    "JobNotCancellableError": "X_JOB_NOT_CANCELLABLE",
    "JobNotFoundError": "X_JOB_NOT_FOUND",
    "JobNotPromotableError": "X_JOB_NOT_PROMOTABLE",
    "JobNotRemovableError": "X_JOB_NOT_REMOVABLE",
    "JobNotRequeueableError": "X_JOB_NOT_REQUEUEABLE",
    "JobOnSettledFailedError": "X_JOB_ON_SETTLED_FAILED",
    "JobPageInvalidError": "X_JOB_PAGE_INVALID",
    "JobRowStatusUnknownError": "X_JOB_ROW_STATUS_UNKNOWN",
    "JobSlotLostError": "X_JOB_SLOT_LOST",
    "JobTenantRequiredError": "X_JOB_TENANT_REQUIRED",
    "JobTenantMismatchError": "X_JOB_TENANT_MISMATCH",
    "JobTimeoutError": "X_JOB_TIMEOUT",
    "LeaseLostError": "X_JOB_LEASE_LOST",
    "OutboxNoTxError": "X_OUTBOX_NO_TX",
    "StepDuplicateError": "X_STEP_DUPLICATE",
    "WebhookDeliveryFailedError": "X_WEBHOOK_DELIVERY_FAILED",
    "WebhookDeliveryRejectedError": "X_WEBHOOK_DELIVERY_REJECTED",
    "WebhookDeliveryThrottledError": "X_WEBHOOK_DELIVERY_THROTTLED",
    "WebhookEndpointDisabledError": "X_WEBHOOK_ENDPOINT_DISABLED",
    "WebhookEndpointInvalidError": "X_WEBHOOK_ENDPOINT_INVALID",
    "WebhookEndpointUnknownError": "X_WEBHOOK_ENDPOINT_UNKNOWN",
    "WebhookEventInvalidError": "X_WEBHOOK_EVENT_INVALID",
    "WebhookEventUnknownError": "X_WEBHOOK_EVENT_UNKNOWN",
}


@pytest.mark.parametrize(("name", "code"), sorted(SPEC_CLASSES.items()))
def test_every_spec_error_class_exists_with_its_code(name: str, code: str) -> None:
    cls = getattr(errors, name)
    assert issubclass(cls, UltimateError)
    error = cls("what happened", meta={"job": "j"})
    assert error.code == code
    assert error_code_of(error) == code
    assert str(error) == f"{code}: what happened"
    assert error.to_dict() == {"code": code, "message": "what happened", "meta": {"job": "j"}}


def test_subclasses_are_caught_as_their_family() -> None:
    with pytest.raises(errors.JobDeclarationInvalidError):
        raise errors.JobConcurrencyKeyInvalidError("key")
    with pytest.raises(errors.JobDuplicateError):
        raise errors.JobNameTakenError("taken")
    with pytest.raises(errors.JobNotCancellableError):
        raise errors.CancelUnsupportedError("no cancel")


def test_an_instance_may_carry_an_app_code_without_changing_its_class() -> None:
    error = UltimateError("gateway said no", code="X_INVOICE_REJECTED")
    assert error.code == "X_INVOICE_REJECTED"
    assert UltimateError("x").code == "X_INTERNAL"


def test_error_code_of_answers_none_for_foreign_errors() -> None:
    assert error_code_of(ValueError("x")) is None
    assert error_code_of(UltimateError("x", code="X_A")) == "X_A"


def fresh_code() -> str:
    return f"X_TEST_{uuid.uuid4().hex.upper()}"


@pytest.mark.parametrize("retry_class", ["terminal", "retry-after", "retryable"])
def test_a_registered_code_answers_its_class(retry_class: errors.RetryClass) -> None:
    code = fresh_code()
    register_error_retry({code: retry_class})
    assert retry_for(code) == retry_class
    assert retry_class_of(UltimateError("x", code=code)) == retry_class


def test_an_unclassified_code_keeps_the_backoff_path() -> None:
    code = fresh_code()
    assert retry_for(code) == "terminal"  # the spec's retryFor answers terminal for it …
    assert retry_for(None) == "terminal"
    assert registered_retry(code) is None
    assert retry_class_of(UltimateError("x", code=code)) == "retryable"  # … the queue retries
    assert retry_class_of(KeyError("not ours")) == "retryable"


def test_registering_the_same_class_twice_is_one_registration() -> None:
    code = fresh_code()
    register_error_retry({code: "terminal"})
    register_error_retry({code: "terminal"})
    assert retry_for(code) == "terminal"


def test_reclassifying_a_code_differently_is_refused_and_changes_nothing() -> None:
    code, other = fresh_code(), fresh_code()
    register_error_retry({code: "terminal"})
    with pytest.raises(InvariantError) as info:
        register_error_retry({other: "retryable", code: "retryable"})
    assert info.value.meta == {"code": code, "known": "terminal", "asked": "retryable"}
    assert retry_for(code) == "terminal"
    assert registered_retry(other) is None  # the table is all-or-nothing


@pytest.mark.parametrize(
    "table",
    [{"NOT_X": "terminal"}, {fresh_code(): "fatal"}, {fresh_code(): None}],
)
def test_a_malformed_classification_is_refused(table: dict[str, object]) -> None:
    with pytest.raises(InvariantError):
        register_error_retry(table)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("code", "retry_class"),
    [
        ("X_JOB_KEY_BUSY", "terminal"),
        ("X_INPUT_INVALID", "terminal"),
        ("X_RATE_LIMITED", "retry-after"),
        ("X_OVERLOADED", "retry-after"),
        ("X_TIMEOUT", "retryable"),
        ("X_DRAINING", "retryable"),
    ],
)
def test_the_cores_own_codes_are_classified_as_the_spec_says(code: str, retry_class: str) -> None:
    assert retry_for(code) == retry_class


def test_a_spec_code_not_kept_is_declared_nowhere_and_named_in_the_deviations() -> None:
    from docs.gen_reference import SPEC_CODES_NOT_KEPT, errors_page

    page = errors_page()
    deviations = page.split("## Deviations from the spec", 1)[1]
    declared = {
        getattr(cls, "code", None) for cls in vars(errors).values() if isinstance(cls, type)
    }
    for code in SPEC_CODES_NOT_KEPT:
        assert code not in declared, code
        assert f"`{code}`" in deviations
        assert f"| `{code}` |" not in page  # not in the table of codes either
    assert "X_ACTION_JOB_UNBRIDGED" in SPEC_CODES_NOT_KEPT
