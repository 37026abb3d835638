"""Outbound webhooks as a job family: signing, delivery, the ledger, the SSRF guard.

    from ujobs.webhooks import webhook, Endpoint, Event, MemoryWebhookLedger
    from ujobs.webhooks import sign_standard, verify_standard, sign_ultimate, verify_ultimate

``ujobs.webhooks.builtin`` holds the families ``ujobs webhook-deliverer`` always runs (endpoints and
subscriptions in Postgres); ``ujobs.webhooks.payload`` is what a delivery carries (the Standard
Webhooks envelope naming the topic, or the published bytes); ``webhooks/verify/`` is the
partner kit.
"""

from __future__ import annotations

from ujobs.webhooks.errors import WebhookSecretInvalidError, WebhookSignatureInvalidError
from ujobs.webhooks.family import Endpoint, Event, WebhookInput, webhook
from ujobs.webhooks.ledger import (
    DeliveryAttempt,
    MemoryWebhookLedger,
    WebhookLedger,
    memory_webhook_ledger,
)
from ujobs.webhooks.signature import sign_standard, sign_ultimate, verify_standard, verify_ultimate

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
