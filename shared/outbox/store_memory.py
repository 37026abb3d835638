"""``memory_outbox_store()``: the outbox in a dict, for ``ujobs dev`` and tests.

There is no transaction to join: a stage lands at once (the caller's ``tx`` is only the
signal that it asked to join one). A published row is DROPPED — ``retained()`` is the relay's
backlog, not a running total; the Postgres store keeps ``published_at`` as the audit trail.
The claim, its lease and the fences on ``release`` / ``mark_published`` behave exactly as the
Postgres store's, so a relay test on this store means the same thing.

The store is its own wake: a stage calls every subscribed relay at once, in process (there is
no commit to wait for), and that wake is never lost, so it is ``live``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import orjson

from ujobs.clock import SYSTEM_CLOCK, Clock
from ujobs.drivers.base import EnqueueRequest
from ujobs.ids import new_id
from ujobs.outbox.contract import OutboxRecord, OutboxWake, Staged, WakeCallback


@dataclass(frozen=True, slots=True)
class _Row:
    record: OutboxRecord
    claimed_at_ms: int | None = None


class MemoryOutboxStore:
    def __init__(self, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self.clock = clock
        self._rows: dict[str, _Row] = {}
        self._last_staged_ms = 0
        self._subscribers: dict[int, WakeCallback] = {}
        self._next_subscriber = 0

    # -- the wake (in process) ------------------------------------------------------------
    @property
    def wake(self) -> OutboxWake:
        return self

    @property
    def live(self) -> bool:
        return True

    def subscribe(self, callback: WakeCallback) -> Callable[[], None]:
        key = self._next_subscriber
        self._next_subscriber += 1
        self._subscribers[key] = callback

        def unsubscribe() -> None:
            self._subscribers.pop(key, None)

        return unsubscribe

    # -- the store ------------------------------------------------------------------------
    async def stage(self, tx: Any, requests: Sequence[EnqueueRequest]) -> list[Staged]:
        # Monotonic per store, so two stages in one "transaction" keep their order even if
        # the wall clock steps back between them (the id breaks ties within a millisecond).
        staged_ms = max(self.clock.now_ms(), self._last_staged_ms)
        self._last_staged_ms = staged_ms
        answers: list[Staged] = []
        for request in requests:
            record = OutboxRecord(
                id=request.id or new_id(),
                run_id=request.run_id or new_id(),
                name=request.name,
                queue=request.queue,
                # Stored as the Postgres store stores it: plain JSON, detached from the caller.
                input=orjson.loads(orjson.dumps(request.input)),
                tenant_id=request.tenant_id,
                idempotency_key=request.idempotency_key,
                max_attempts=request.max_attempts,
                run_at_ms=request.run_at_ms,
                traceparent=request.traceparent,
                enqueued_by=request.enqueued_by,
                staged_at_ms=staged_ms,
                claimed_by="",
                priority=request.priority,
            )
            self._rows[record.id] = _Row(record)
            answers.append(Staged(record.id, record.run_id))
        for callback in list(self._subscribers.values()):
            callback("")
        return answers

    async def claim(
        self, claimant: str, limit: int, *, now_ms: int, lease_ms: int
    ) -> list[OutboxRecord]:
        takeable = sorted(
            (
                row
                for row in self._rows.values()
                if row.claimed_at_ms is None or row.claimed_at_ms <= now_ms - lease_ms
            ),
            key=lambda row: (row.record.staged_at_ms, row.record.id),
        )[:limit]
        claimed: list[OutboxRecord] = []
        for row in takeable:
            record = replace(row.record, claimed_by=claimant)
            self._rows[record.id] = _Row(record, claimed_at_ms=now_ms)
            claimed.append(record)
        return claimed

    async def release(self, ids: Sequence[str], claimant: str) -> int:
        released = 0
        for record_id in ids:
            row = self._rows.get(record_id)
            if (
                row is not None
                and row.claimed_at_ms is not None
                and row.record.claimed_by == claimant
            ):
                self._rows[record_id] = _Row(replace(row.record, claimed_by=""))
                released += 1
        return released

    async def mark_published(self, record_id: str, claimant: str, *, now_ms: int) -> bool:
        row = self._rows.get(record_id)
        if row is None or row.claimed_at_ms is None or row.record.claimed_by != claimant:
            return False
        del self._rows[record_id]
        return True

    async def pending(self) -> int:
        return len(self._rows)

    def retained(self) -> list[OutboxRecord]:
        """Every row the store holds — the backlog: a published row is dropped."""
        return [row.record for row in self._rows.values()]


def memory_outbox_store(*, clock: Clock = SYSTEM_CLOCK) -> MemoryOutboxStore:
    """An in-process outbox store (``ujobs dev``, tests); stages land at once."""
    return MemoryOutboxStore(clock=clock)
