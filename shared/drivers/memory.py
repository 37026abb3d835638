"""The memory driver: the whole contract in one heap, for ``ujobs dev`` and tests.

It is held to the same conformance suite as Postgres and Redis: a fake that was never checked
against the real thing is a liability. Every operation runs without an ``await`` in between its
reads and writes, so on one event loop each is atomic, as a statement is in Postgres.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import orjson

from shared.clock import SYSTEM_CLOCK, Clock
from shared.drivers.base import (
    ALL_STATES,
    CLAIMABLE_STATES,
    LIVE_STATES,
    ClaimedJob,
    ClaimOptions,
    ClaimRef,
    CounterKind,
    DriverStats,
    Enqueued,
    EnqueueRequest,
    ExhaustedJob,
    HeartbeatResult,
    JobRow,
    JobState,
    NackOptions,
    QueueStats,
    StepRecord,
    nack_counter,
    nack_state,
)
from shared.drivers.memory_state import MemoryState
from shared.errors import ClaimQueuesEmptyError, InvariantError
from shared.ids import new_id

JSONValue = Any


def json_copy(value: JSONValue) -> JSONValue:
    """Store what Postgres would: JSON in, an equal but independent value out."""
    return orjson.loads(orjson.dumps(value))


@dataclass(slots=True)
class _Row:
    id: str
    run_id: str
    name: str
    queue: str
    state: JobState
    input: JSONValue
    tenant_id: str | None
    idempotency_key: str
    attempt: int
    max_attempts: int
    run_at_ms: int
    created_at_ms: int
    updated_at_ms: int
    seq: int
    finished_at_ms: int | None = None
    claimed_by: str | None = None
    claim: int = 0
    lease_expires_at_ms: int | None = None
    last_error: str | None = None
    progress: JSONValue = None
    traceparent: str | None = None
    enqueued_by: str | None = None

    def view(self) -> JobRow:
        return JobRow(
            id=self.id,
            run_id=self.run_id,
            name=self.name,
            queue=self.queue,
            state=self.state,
            input=json_copy(self.input),
            tenant_id=self.tenant_id,
            idempotency_key=self.idempotency_key,
            attempt=self.attempt,
            max_attempts=self.max_attempts,
            run_at_ms=self.run_at_ms,
            created_at_ms=self.created_at_ms,
            updated_at_ms=self.updated_at_ms,
            finished_at_ms=self.finished_at_ms,
            claimed_by=self.claimed_by,
            claim=self.claim,
            lease_expires_at_ms=self.lease_expires_at_ms,
            last_error=self.last_error,
            progress=json_copy(self.progress),
            traceparent=self.traceparent,
            enqueued_by=self.enqueued_by,
        )

    def live_key(self) -> tuple[str, str, str]:
        return (self.name, self.tenant_id or "", self.idempotency_key)


class MemoryDriver:
    """In-process maps behind the ``JobDriver`` contract."""

    name = "memory"

    def __init__(self, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self.clock = clock
        self.state = MemoryState()
        self._rows: dict[str, _Row] = {}
        self._live: dict[tuple[str, str, str], str] = {}
        self._steps: dict[str, dict[str, StepRecord]] = {}
        self._seq = 0
        self._closed = False

    # -- capabilities (filled in by the modules that implement them) ----------------------
    @property
    def introspect(self) -> Any:
        return None

    @property
    def leases(self) -> Any:
        return None

    @property
    def workers(self) -> Any:
        return None

    @property
    def backfills(self) -> Any:
        return None

    # -- enqueue ------------------------------------------------------------------------
    def _insert(self, request: EnqueueRequest, now: int) -> Enqueued:
        if request.id is not None and request.id in self._rows:
            existing = self._rows[request.id]
            return Enqueued(existing.id, existing.run_id, True)
        key = (request.name, request.tenant_id or "", request.idempotency_key)
        holder = self._live.get(key)
        if holder is not None:
            live = self._rows[holder]
            return Enqueued(live.id, live.run_id, True)
        if request.max_attempts < 1:
            raise InvariantError("max_attempts must be at least 1")
        run_at = request.run_at_ms if request.run_at_ms is not None else now
        self._seq += 1
        row = _Row(
            id=request.id or new_id(),
            run_id=request.run_id or new_id(),
            name=request.name,
            queue=request.queue,
            state="delayed" if run_at > now else "ready",
            input=json_copy(request.input),
            tenant_id=request.tenant_id,
            idempotency_key=request.idempotency_key,
            attempt=0,
            max_attempts=request.max_attempts,
            run_at_ms=run_at,
            created_at_ms=now,
            updated_at_ms=now,
            seq=self._seq,
            traceparent=request.traceparent,
            enqueued_by=request.enqueued_by,
        )
        self._rows[row.id] = row
        self._live[key] = row.id
        return Enqueued(row.id, row.run_id, False)

    async def enqueue(self, request: EnqueueRequest) -> Enqueued:
        return self._insert(request, self.clock.now_ms())

    async def enqueue_many(self, requests: Sequence[EnqueueRequest]) -> list[Enqueued]:
        now = self.clock.now_ms()
        return [self._insert(r, now) for r in requests]

    # -- claim --------------------------------------------------------------------------
    async def claim(self, options: ClaimOptions) -> list[ClaimedJob]:
        if not options.queues:
            raise ClaimQueuesEmptyError("claim needs at least one queue")
        if options.limit < 1 or options.visibility_ms < 1:
            raise InvariantError("claim limit and visibility_ms must be at least 1")
        now = self.clock.now_ms()
        queues = set(options.queues) - self.state.paused_queues
        due: list[_Row] = []
        for row in self._rows.values():
            if row.queue not in queues:
                continue
            if (row.state in CLAIMABLE_STATES and row.run_at_ms <= now) or (
                row.state == "running"
                and row.lease_expires_at_ms is not None
                and row.lease_expires_at_ms <= now
            ):
                due.append(row)
        due.sort(key=lambda r: (r.run_at_ms, r.seq))
        exhausted: list[ExhaustedJob] = []
        claimed: list[ClaimedJob] = []
        for row in due:
            if row.state == "running" and row.attempt >= row.max_attempts:
                exhausted.append(self._bury(row, options, now))
                continue
            if len(claimed) >= options.limit:
                continue
            row.state = "running"
            row.attempt += 1
            row.claim += 1
            row.claimed_by = options.worker_id
            row.lease_expires_at_ms = now + options.visibility_ms
            row.updated_at_ms = now
            claimed.append(self._claimed(row))
        if exhausted and options.on_exhausted is not None:
            await options.on_exhausted(exhausted)
        return claimed

    def _bury(self, row: _Row, options: ClaimOptions, now: int) -> ExhaustedJob:
        """A lapsed lease on the final attempt: every worker that took it died. Dead-letter it."""
        target: JobState = "failed" if row.name in options.drop_exhausted else "dead"
        row.state = target
        row.last_error = "LEASE_LAPSED_FINAL_ATTEMPT"
        row.finished_at_ms = now
        row.updated_at_ms = now
        row.lease_expires_at_ms = None
        self._live.pop(row.live_key(), None)
        self.state.count(row.name, "dead" if target == "dead" else "failed", now, None)
        return ExhaustedJob(
            id=row.id,
            run_id=row.run_id,
            name=row.name,
            queue=row.queue,
            input=json_copy(row.input),
            tenant_id=row.tenant_id,
            attempt=row.attempt,
            max_attempts=row.max_attempts,
            state="dead" if target == "dead" else "failed",
        )

    @staticmethod
    def _claimed(row: _Row) -> ClaimedJob:
        assert row.claimed_by is not None
        assert row.lease_expires_at_ms is not None
        return ClaimedJob(
            id=row.id,
            run_id=row.run_id,
            name=row.name,
            queue=row.queue,
            input=json_copy(row.input),
            tenant_id=row.tenant_id,
            idempotency_key=row.idempotency_key,
            attempt=row.attempt,
            max_attempts=row.max_attempts,
            worker_id=row.claimed_by,
            claim=row.claim,
            run_at_ms=row.run_at_ms,
            created_at_ms=row.created_at_ms,
            lease_expires_at_ms=row.lease_expires_at_ms,
            traceparent=row.traceparent,
            enqueued_by=row.enqueued_by,
        )

    # -- settle -------------------------------------------------------------------------
    def _owned(self, job_id: str, ref: ClaimRef) -> _Row | None:
        row = self._rows.get(job_id)
        if (
            row is None
            or row.state != "running"
            or row.claimed_by != ref.worker_id
            or row.claim != ref.claim
        ):
            return None
        return row

    def _finish(self, row: _Row, state: JobState, now: int) -> None:
        row.state = state
        row.finished_at_ms = now
        row.updated_at_ms = now
        row.lease_expires_at_ms = None
        self._live.pop(row.live_key(), None)

    async def ack(self, job_id: str, ref: ClaimRef, *, duration_ms: int | None = None) -> bool:
        row = self._owned(job_id, ref)
        if row is None:
            return False
        now = self.clock.now_ms()
        self._finish(row, "done", now)
        self.state.count(row.name, "done", now, duration_ms)
        return True

    async def nack(self, job_id: str, ref: ClaimRef, options: NackOptions) -> bool:
        row = self._owned(job_id, ref)
        if row is None:
            return False
        now = self.clock.now_ms()
        target = nack_state(options)
        if not options.count:
            row.attempt = max(0, row.attempt - 1)
        if options.error is not None:
            row.last_error = options.error
        if target in ("dead", "failed"):
            self._finish(row, target, now)
        else:
            row.state = target
            row.run_at_ms = options.run_at_ms if options.run_at_ms is not None else now
            row.lease_expires_at_ms = None
            row.updated_at_ms = now
        counter: CounterKind | None = nack_counter(options)
        if counter is not None:
            self.state.count(row.name, counter, now, options.duration_ms)
        return True

    async def heartbeat(self, job_id: str, ref: ClaimRef, visibility_ms: int) -> HeartbeatResult:
        row = self._rows.get(job_id)
        if row is None:
            return "lost"
        if row.state == "cancelled" and row.claimed_by == ref.worker_id and row.claim == ref.claim:
            return "cancelled"
        owned = self._owned(job_id, ref)
        if owned is None:
            return "lost"
        now = self.clock.now_ms()
        owned.lease_expires_at_ms = now + visibility_ms
        owned.updated_at_ms = now
        return "renewed"

    # -- steps --------------------------------------------------------------------------
    async def load_steps(self, run_id: str) -> list[StepRecord]:
        steps = self._steps.get(run_id, {})
        return sorted(
            (replace(s, output=json_copy(s.output)) for s in steps.values()), key=lambda s: s.seq
        )

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
        row = self._owned(job_id, ref)
        if row is None or row.run_id != run_id:
            return False
        steps = self._steps.setdefault(run_id, {})
        if name not in steps:
            self._seq += 1
            steps[name] = StepRecord(
                name=name,
                output=json_copy(output),
                seq=self._seq,
                started_at_ms=started_at_ms,
                finished_at_ms=self.clock.now_ms(),
            )
        return True

    # -- stats --------------------------------------------------------------------------
    async def stats(self) -> DriverStats:
        now = self.clock.now_ms()
        counts: dict[str, dict[str, int]] = {}
        oldest: dict[str, int] = {}
        for row in self._rows.values():
            per = counts.setdefault(row.queue, dict.fromkeys(ALL_STATES, 0) | {"due": 0})
            per[row.state] += 1
            if row.state in CLAIMABLE_STATES and row.run_at_ms <= now:
                per["due"] += 1
                oldest[row.queue] = min(oldest.get(row.queue, row.run_at_ms), row.run_at_ms)
        return DriverStats(
            queues={
                q: QueueStats(
                    queue=q,
                    oldest_due_run_at_ms=oldest.get(q),
                    paused=q in self.state.paused_queues,
                    **c,
                )
                for q, c in counts.items()
            }
        )

    async def close(self) -> None:
        self._closed = True

    # -- seams for the modules that extend this driver ----------------------------------
    def rows(self) -> dict[str, _Row]:
        return self._rows

    def live_index(self) -> dict[tuple[str, str, str], str]:
        return self._live

    def steps_index(self) -> dict[str, dict[str, StepRecord]]:
        return self._steps


def memory_driver(*, clock: Clock = SYSTEM_CLOCK) -> MemoryDriver:
    """A fresh in-process driver."""
    return MemoryDriver(clock=clock)


__all__ = ["LIVE_STATES", "MemoryDriver", "memory_driver"]
