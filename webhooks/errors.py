"""The webhook family's error codes and how the queue treats each one.

The delivery codes are declared in ``ujobs.errors`` (one tree of codes); the two a receiver
meets when verifying are declared here, beside the module that raises them. Importing this
module registers the retry classes, which is why ``webhooks/__init__`` imports it first.
"""

from __future__ import annotations

from ujobs.errors import (
    UltimateError,
    WebhookDeliveryFailedError,
    WebhookDeliveryRejectedError,
    WebhookDeliveryThrottledError,
    WebhookEndpointDisabledError,
    WebhookEndpointInvalidError,
    WebhookEndpointUnknownError,
    WebhookEventInvalidError,
    WebhookEventUnknownError,
    register_error_retry,
)

__all__ = [
    "WebhookDeliveryFailedError",
    "WebhookDeliveryRejectedError",
    "WebhookDeliveryThrottledError",
    "WebhookEndpointDisabledError",
    "WebhookEndpointInvalidError",
    "WebhookEndpointUnknownError",
    "WebhookEventInvalidError",
    "WebhookEventUnknownError",
    "WebhookSecretInvalidError",
    "WebhookSignatureInvalidError",
]


class WebhookSignatureInvalidError(UltimateError):
    """A delivery that does not verify; ``meta["reason"]`` says which check refused it
    (``missing-header``, ``malformed``, ``stale``, ``future``, ``mismatch``)."""

    code = "X_WEBHOOK_SIGNATURE_INVALID"


class WebhookSecretInvalidError(UltimateError):
    """A signing secret or key that cannot be used (bad prefix, bad base64, wrong length)."""

    code = "X_WEBHOOK_SECRET_INVALID"


register_error_retry(
    {
        # A 429 / 503 names its own wait: the nack waits it out (clamped by retry.max_delay).
        "X_WEBHOOK_DELIVERY_THROTTLED": "retry-after",
        # Transport failures and non-2xx answers: the backoff path, counted toward disable_after.
        "X_WEBHOOK_DELIVERY_FAILED": "retryable",
        # 410 Gone: the receiver says this endpoint will never take a delivery again.
        "X_WEBHOOK_DELIVERY_REJECTED": "terminal",
        # A disabled endpoint keeps its events: the delivery dead-letters and waits for
        # `ujobs webhooks redeliver` after an operator re-enables it.
        "X_WEBHOOK_ENDPOINT_DISABLED": "terminal",
        "X_WEBHOOK_ENDPOINT_INVALID": "terminal",
        "X_WEBHOOK_ENDPOINT_UNKNOWN": "terminal",
        "X_WEBHOOK_EVENT_INVALID": "terminal",
        "X_WEBHOOK_EVENT_UNKNOWN": "terminal",
        "X_WEBHOOK_SECRET_INVALID": "terminal",
    }
)
