"""The delivery ledger seam: every attempt that reached for a socket, and the disable verdict.

``webhook()`` records each attempt BEFORE it throws (a failure the ledger cannot see is one the
consecutive count cannot see, and the endpoint never gets disabled), asks ``is_disabled``
before every socket, and calls ``disable`` when ``disable_after`` consecutive failures pile up
or the receiver answers 410. Re-enabling is always the operator's.

``MemoryWebhookLedger`` is for tests and development: a bounded ring in one heap. The Postgres
ledger (``ujobs.webhooks.store_pg``) keeps rows for as long as the operator's retention says.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any, Literal, Protocol

AttemptOutcome = Literal["delivered", "failed", "skipped"]
EXCERPT_CHARS = 1024


@dataclass(frozen=True, slots=True)
class DeliveryAttempt:
    """One attempt as the ledger keeps it. ``skipped`` (a disabled endpoint) never counts
    toward ``disable_after``; ``delivered`` resets the count."""

    endpoint_id: str
    event_id: str
    job_id: str
    attempt: int
    outcome: AttemptOutcome
    status: int | None
    code: str | None
    latency_ms: int
    response_excerpt: str
    at_ms: int

    def to_dict(self) -> dict[str, Any]:
        """The attempt as ``ujobs webhooks deliveries --json`` and the api answer it."""
        return {
            "endpointId": self.endpoint_id,
            "eventId": self.event_id,
            "jobId": self.job_id,
            "attempt": self.attempt,
            "outcome": self.outcome,
            "status": self.status,
            "code": self.code,
            "latencyMs": self.latency_ms,
            "response": self.response_excerpt,
            "atMs": self.at_ms,
        }


def excerpt(text: str) -> str:
    """What the ledger stores of a response body: the first ``EXCERPT_CHARS`` characters."""
    return text[:EXCERPT_CHARS]


class WebhookLedger(Protocol):
    async def record(self, attempt: DeliveryAttempt) -> int:
        """Store ``attempt``; answers the endpoint's consecutive failures after it."""
        ...

    async def is_disabled(self, endpoint_id: str) -> bool: ...

    async def disable(self, endpoint_id: str, reason: str) -> None: ...


class MemoryWebhookLedger:
    """A bounded ring of attempts plus the per-endpoint count and verdict (dev and tests)."""

    def __init__(self, capacity: int = 10_000) -> None:
        self.attempts: deque[DeliveryAttempt] = deque(maxlen=capacity)
        self.consecutive: dict[str, int] = {}
        self.disabled: dict[str, str] = {}

    async def record(self, attempt: DeliveryAttempt) -> int:
        self.attempts.append(attempt)
        count = self.consecutive.get(attempt.endpoint_id, 0)
        if attempt.outcome == "delivered":
            count = 0
        elif attempt.outcome == "failed":
            count += 1
        self.consecutive[attempt.endpoint_id] = count
        return count

    async def is_disabled(self, endpoint_id: str) -> bool:
        return endpoint_id in self.disabled

    async def disable(self, endpoint_id: str, reason: str) -> None:
        self.disabled.setdefault(endpoint_id, reason)

    def enable(self, endpoint_id: str) -> None:
        """The operator's re-enable: the verdict goes, and the count starts again."""
        self.disabled.pop(endpoint_id, None)
        self.consecutive[endpoint_id] = 0

    def of(self, endpoint_id: str) -> list[DeliveryAttempt]:
        return [a for a in self.attempts if a.endpoint_id == endpoint_id]


def memory_webhook_ledger(capacity: int = 10_000) -> MemoryWebhookLedger:
    return MemoryWebhookLedger(capacity)
