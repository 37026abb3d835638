"""The outbox's contracts: what a store, a claimed row and a wake are (see ``ujobs.outbox``).

Kept apart from the facade and the relay so every store, the relay and the facade depend on
this one small file and not on each other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ujobs.drivers.base import EnqueueRequest
from ujobs.wake.listener import OUTBOX_WAKE_CHANNEL
from ujobs.wake.protocol import QueueWake, WakeCallback

__all__ = [
    "OUTBOX_WAKE_CHANNEL",
    "OutboxRecord",
    "OutboxStore",
    "OutboxWake",
    "Staged",
    "WakeCallback",
]

JSONValue = Any


@dataclass(frozen=True, slots=True)
class Staged:
    """What staging answers: the ids the job will have once the relay publishes it."""

    id: str
    run_id: str


@dataclass(frozen=True, slots=True)
class OutboxRecord:
    """One claimed row. ``claimed_by`` is the claimant's token; every later mutation of the
    row (``release``, ``mark_published``) is fenced on it."""

    id: str
    run_id: str
    name: str
    queue: str
    input: JSONValue
    tenant_id: str | None
    idempotency_key: str
    max_attempts: int
    run_at_ms: int | None
    traceparent: str | None
    enqueued_by: str | None
    staged_at_ms: int
    claimed_by: str
    priority: int = 0

    def request(self) -> EnqueueRequest:
        """The publish: under the row's own ids, so a republish meets the job the first
        publish made (the driver inserts nothing under an id that already names a row)."""
        return EnqueueRequest(
            name=self.name,
            input=self.input,
            idempotency_key=self.idempotency_key,
            queue=self.queue,
            tenant_id=self.tenant_id,
            max_attempts=self.max_attempts,
            run_at_ms=self.run_at_ms,
            id=self.id,
            run_id=self.run_id,
            traceparent=self.traceparent,
            enqueued_by=self.enqueued_by,
            priority=self.priority,
        )


OutboxWake = QueueWake
"""What tells an idle relay that a row was committed: the worker's wake shape
(``subscribe(callback(payload))`` and ``live``, True once a probe proved the channel). For
Postgres, ``postgres_wake(dsn, pool, channels=(OUTBOX_WAKE_CHANNEL,))`` (``ujobs.wake.listener``),
or
``wake.channel(OUTBOX_WAKE_CHANNEL)`` of a wake that listens to several channels."""


@runtime_checkable
class OutboxStore(Protocol):
    """Where staged enqueues wait for the relay. Every mutation after the claim is fenced on
    the claimant's token, so a relay that stalled past its lease touches nothing."""

    @property
    def wake(self) -> OutboxWake | None:
        """The store's own in-process wake (memory), or None (Postgres: the relay LISTENs on
        ``x_outbox_wake`` through ``ujobs.wake.listener.postgres_wake``)."""
        ...

    async def stage(self, tx: Any, requests: Sequence[EnqueueRequest]) -> list[Staged]:
        """Stage ``requests`` inside the transaction ``tx`` (the ambient one); one statement."""
        ...

    async def claim(
        self, claimant: str, limit: int, *, now_ms: int, lease_ms: int
    ) -> list[OutboxRecord]:
        """Take up to ``limit`` unpublished rows whose claim is absent or older than
        ``lease_ms``, in ``(staged_at, id)`` order, stamping them with ``claimant``."""
        ...

    async def release(self, ids: Sequence[str], claimant: str) -> int:
        """Unclaim the rows ``claimant`` still holds; answers how many it did."""
        ...

    async def mark_published(self, record_id: str, claimant: str, *, now_ms: int) -> bool:
        """Retire a published row; False when ``claimant`` no longer holds it."""
        ...

    async def pending(self) -> int:
        """Rows staged (and committed) but not yet published."""
        ...
