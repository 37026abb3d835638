"""Outbound webhooks as a job family: signing, delivery, the ledger, the SSRF guard.

    from webhooks import webhook, Endpoint, Event, MemoryWebhookLedger
    from webhooks import sign_standard, verify_standard, sign_ultimate, verify_ultimate

``webhooks.builtin`` holds the families ``ujobs webhook-deliverer`` always runs (endpoints and
subscriptions in Postgres); ``webhooks.payload`` is what a delivery carries (the Standard
Webhooks envelope naming the topic, or the published bytes); ``webhooks/verify/`` is the
partner kit.
"""

from __future__ import annotations

from webhooks.errors import WebhookSecretInvalidError, WebhookSignatureInvalidError
from webhooks.family import Endpoint, Event, WebhookInput, webhook
from webhooks.ledger import (
    DeliveryAttempt,
    MemoryWebhookLedger,
    WebhookLedger,
    memory_webhook_ledger,
)
from webhooks.signature import sign_standard, sign_ultimate, verify_standard, verify_ultimate

__all__ = [
    "DeliveryAttempt",
    "Endpoint",
    "Event",
    "MemoryWebhookLedger",
    "WebhookInput",
    "WebhookLedger",
    "WebhookSecretInvalidError",
    "WebhookSignatureInvalidError",
    "memory_webhook_ledger",
    "sign_standard",
    "sign_ultimate",
    "verify_standard",
    "verify_ultimate",
    "webhook",
]
