"""The memory driver: the whole contract in one heap, for ``ujobs dev`` and tests.

It is held to the same conformance suite as Postgres and Redis: a fake that was never checked
against the real thing is a liability. Every operation runs without an ``await`` between its
reads and writes, so on one event loop each is atomic, as a statement is in Postgres. Every
time decision reads the injected ``clock``, so a test moves time instead of sleeping.

This module holds the core operations (enqueue, claim, settles, heartbeat, steps, stats); the
optional capabilities live beside it (``introspect``, ``leases``, ``workers``, ``backfills``)
over the same ``MemoryState``.
"""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import AbstractAsyncContextManager
from dataclasses import replace
from typing import Any

import orjson

from ujobs.clock import SYSTEM_CLOCK, Clock
from ujobs.drivers.base import (
    AHEAD_RETURNS_MAX,
    ALL_STATES,
    ATTEMPT_ERROR_CHARS,
    ATTEMPT_ERRORS_KEPT,
    CLAIMABLE_STATES,
    LEASE_LAPSED_FINAL_ATTEMPT,
    AttemptError,
    BackfillLedger,
    ClaimedJob,
    ClaimOptions,
    ClaimRef,
    DriverStats,
    Enqueued,
    EnqueueRequest,
    ExhaustedJob,
    HeartbeatResult,
    JobIntrospection,
    JobRow,
    JobState,
    LeaseStore,
    NackOptions,
    QueueStats,
    StepRecord,
    WorkerRegistry,
    check_enqueue_request,
    nack_counter,
    nack_state,
    slot_holder,
)
from ujobs.drivers.fairness import (
    DEFAULT_WEIGHT,
    FairRow,
    TenantWeights,
    check_tenant,
    check_weight,
    claim_order,
    group_of,
)
from ujobs.drivers.memory.backfills import MemoryBackfillLedger
from ujobs.drivers.memory.children import MemoryChildren
from ujobs.drivers.memory.introspect import MemoryIntrospection
from ujobs.drivers.memory.leases import MemoryLeaseStore
from ujobs.drivers.memory.state import (
    MemoryRow,
    MemoryState,
    debounceable,
    json_copy,
    live_key,
    run_key,
)
from ujobs.drivers.memory.workers import MemoryWorkerRegistry
from ujobs.drivers.results import SettleTicket, SettleWaits, registered
from ujobs.errors import ClaimQueuesEmptyError, InvariantError
from ujobs.ids import new_id

JSONValue = Any


def _fair_row(row: MemoryRow) -> FairRow:
    return FairRow(row.id, row.queue, group_of(row.tenant_id), row.run_at_ms, row.seq, row.priority)


class MemoryWeights:
    """The memory driver's tenant weights: a map in its heap."""

    def __init__(self, state: MemoryState) -> None:
        self._state = state

    async def weight(self, tenant_id: str) -> int:
        return self._state.tenant_weights.get(check_tenant(tenant_id), DEFAULT_WEIGHT)

    async def set_weight(self, tenant_id: str, weight: int) -> int:
        self._state.tenant_weights[check_tenant(tenant_id)] = check_weight(weight)
        return weight


class MemoryResults:
    """The memory driver's result waits: every finish rings the waits on its id (no mark is
    needed: the hook is in this process)."""

    def __init__(self, state: MemoryState) -> None:
        self._state = state
        self._waits = SettleWaits()
        state.on_finish.append(self._waits.heard)

    async def read(self, job_id: str) -> JobRow | None:
        row = self._state.rows.get(job_id)
        return None if row is None else row.view()

    async def watch(self, job_id: str) -> JobRow | None:
        return await self.read(job_id)

    def listen(self, job_id: str) -> AbstractAsyncContextManager[SettleTicket]:
        return registered(self._waits, job_id)


class MemoryDriver:
    """In-process maps behind the ``JobDriver`` contract, with every optional capability."""

    name = "memory"

    def __init__(self, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self.clock = clock
        self.state = MemoryState()
        self._results = MemoryResults(self.state)
        self._children = MemoryChildren(self.state, clock, self._insert)
        self._workers = MemoryWorkerRegistry(clock)
        self._introspect = MemoryIntrospection(self.state, clock, self._workers)
        self._leases = MemoryLeaseStore(clock)
        self._backfills = MemoryBackfillLedger(clock)
        self._weights = MemoryWeights(self.state)
        self._closed = False

    # -- capabilities --------------------------------------------------------------------
    @property
    def introspect(self) -> JobIntrospection | None:
        return self._introspect

    @property
    def leases(self) -> LeaseStore | None:
        return self._leases

    @property
    def weights(self) -> TenantWeights | None:
        return self._weights

    @property
    def workers(self) -> WorkerRegistry | None:
        return self._workers

    @property
    def backfills(self) -> BackfillLedger | None:
        return self._backfills

    @property
    def store_watch(self) -> None:
        """None: this store never comes back empty under a live process."""
        return None

    @property
    def results(self) -> MemoryResults:
        """Result waits (``ujobs.drivers.results``), rung by the state's finish hook."""
        return self._results

    @property
    def children(self) -> MemoryChildren:
        """Children and the waits on them (``ujobs.drivers.children``)."""
        return self._children

    # -- enqueue ------------------------------------------------------------------------
    def _insert(self, request: EnqueueRequest, now: int) -> Enqueued:
        state = self.state
        if request.id is not None and request.id in state.rows:
            existing = state.rows[request.id]
            return Enqueued(existing.id, existing.run_id, True)
        key = live_key(request.name, request.tenant_id, request.idempotency_key)
        run_at = request.run_at_ms if request.run_at_ms is not None else now
        if request.debounce_ms is not None:
            run_at = max(run_at, now + request.debounce_ms)
        holder = state.live.get(key)
        if holder is not None:
            live = state.rows[holder]
            if request.debounce_ms is not None and debounceable(live, request.debounce_seq):
                live.run_at_ms = run_at
                live.state = "delayed" if run_at > now else "ready"
                live.input = json_copy(request.input)
                live.updated_at_ms = now
                if request.debounce_seq is not None:
                    live.debounce_seq = request.debounce_seq
                return Enqueued(live.id, live.run_id, True, debounced=True)
            return Enqueued(live.id, live.run_id, True)
        if request.unique_for_ms is not None:
            done = state.unique_holder(key, now - request.unique_for_ms)
            if done is not None:
                return Enqueued(done.id, done.run_id, True)
        row = MemoryRow(
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
            seq=state.next_seq(),
            traceparent=request.traceparent,
            enqueued_by=request.enqueued_by,
            unique_for_ms=request.unique_for_ms,
            debounce_seq=request.stored_debounce_seq,
            priority=request.priority,
        )
        state.insert(row)
        return Enqueued(row.id, row.run_id, False)

    async def enqueue(self, request: EnqueueRequest) -> Enqueued:
        check_enqueue_request(request)
        return self._insert(request, self.clock.now_ms())

    async def enqueue_many(self, requests: Iterable[EnqueueRequest]) -> list[Enqueued]:
        # Checked before any insert, so a bad request in the batch inserts nothing (one
        # statement in Postgres is all or nothing too).
        requests = list(requests)
        for request in requests:
            check_enqueue_request(request)
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
        due: list[FairRow] = []
        waiting: dict[str, set[tuple[int, str]]] = {}
        lapsed: list[MemoryRow] = []
        # Every live row holds its key, so the live index is exactly the rows a claim can
        # touch; finished history never slows a claim down.
        rows = self.state.rows
        for row in (rows[job_id] for job_id in self.state.live.values()):
            if row.queue not in queues:
                continue
            if row.state in CLAIMABLE_STATES and row.run_at_ms <= now:
                due.append(_fair_row(row))
            elif row.state in CLAIMABLE_STATES:
                waiting.setdefault(row.queue, set()).add((row.priority, group_of(row.tenant_id)))
            elif (
                row.state == "running"
                and row.lease_expires_at_ms is not None
                and row.lease_expires_at_ms <= now
            ):
                lapsed.append(row)
        lapsed.sort(key=lambda r: (r.priority, r.run_at_ms, r.seq))
        exhausted: list[ExhaustedJob] = []
        again: list[FairRow] = []
        for row in lapsed:
            # Lapsed while claimed ahead and never started: its attempt was never used.
            unused = row.ahead and row.ahead_returns < AHEAD_RETURNS_MAX
            if not unused and row.attempt >= row.max_attempts:
                exhausted.append(self._bury(row, options, now))
            else:
                again.append(_fair_row(row))
        plan = claim_order(
            due,
            limit=options.limit,
            lapsed=again,
            strict=options.strict_queues,
            cursors=self.state.fair_cursors,
            weights=self.state.tenant_weights,
            waiting=waiting,
        )
        self.state.fair_cursors.update(plan.cursors)
        claimed: list[ClaimedJob] = []
        ahead_after = options.ahead_after
        for picked in plan.rows:
            row = rows[picked.id]
            unused = row.state == "running" and row.ahead and row.ahead_returns < AHEAD_RETURNS_MAX
            row.state = "running"
            if unused:
                row.ahead_returns += 1
            else:
                row.attempt += 1
            row.ahead = ahead_after is not None and len(claimed) >= ahead_after
            row.claim += 1
            row.claimed_by = options.worker_id
            row.lease_expires_at_ms = now + options.visibility_ms
            row.progress_at_ms = None
            row.pending_progress = None
            row.updated_at_ms = now
            claimed.append(self._claimed(row))
        if exhausted and options.on_exhausted is not None:
            await options.on_exhausted(exhausted)
        return claimed

    def _bury(self, row: MemoryRow, options: ClaimOptions, now: int) -> ExhaustedJob:
        """A lapsed lease on the final attempt: every worker that took it died. Bury it."""
        target: JobState = "failed" if row.name in options.drop_exhausted else "dead"
        row.last_error = LEASE_LAPSED_FINAL_ATTEMPT
        self.state.finish(row, target, now)
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
            last_error=LEASE_LAPSED_FINAL_ATTEMPT,
        )

    @staticmethod
    def _claimed(row: MemoryRow) -> ClaimedJob:
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
            ahead=row.ahead,
            snoozes=row.snoozes,
            priority=row.priority,
            slot=None,  # fleet slots are the worker's to take (ClaimOptions.slots)
            store_epoch=None,  # one process's heap: a loss of it is the process's own
        )

    # -- settle -------------------------------------------------------------------------
    async def ack(
        self,
        job_id: str,
        ref: ClaimRef,
        *,
        duration_ms: int | None = None,
        result: str | None = None,
        slot: str | None = None,
    ) -> bool:
        if slot is not None:  # in the same turn as the settle: nothing runs between the two
            self._leases.drop(slot, slot_holder(job_id, ref))
        row = self.state.owned(job_id, ref)
        if row is None:
            return False
        now = self.clock.now_ms()
        self.state.land_pending_progress(row)
        row.result = None if result is None else orjson.loads(result)
        self.state.finish(row, "done", now)
        self.state.count(row.name, "done", now, duration_ms)
        return True

    async def nack(
        self, job_id: str, ref: ClaimRef, options: NackOptions, *, slot: str | None = None
    ) -> bool:
        if slot is not None:
            self._leases.drop(slot, slot_holder(job_id, ref))
        row = self.state.owned(job_id, ref)
        if row is None:
            return False
        cap = options.unreachable_cap
        if cap is not None:
            if row.unreachable_returns >= cap:
                return False
            row.unreachable_returns += 1
        now = self.clock.now_ms()
        target = nack_state(options)
        self.state.land_pending_progress(row)
        if not options.count:
            row.attempt = max(0, row.attempt - 1)
        if options.snooze:
            row.snoozes += 1
        if options.error is not None:
            row.last_error = options.error
            if options.count:
                row.attempt_errors.append(
                    AttemptError(row.attempt, options.error[:ATTEMPT_ERROR_CHARS], now)
                )
                del row.attempt_errors[:-ATTEMPT_ERRORS_KEPT]
        if target in ("dead", "failed"):
            self.state.finish(row, target, now)
        else:
            row.state = target
            row.run_at_ms = options.run_at_ms if options.run_at_ms is not None else now
            row.lease_expires_at_ms = None
            row.updated_at_ms = now
            waited = row.children_waited
            if target == "suspended" and waited is not None and waited <= 0:
                # Its last waited child ended while it still ran: due now (nack.sql).
                row.run_at_ms = now
                row.children_waited = None
        counter = nack_counter(options)
        if counter is not None:
            self.state.count(row.name, counter, now, options.duration_ms)
        return True

    async def start_ahead(self, job_id: str, ref: ClaimRef) -> bool:
        row = self.state.owned(job_id, ref)
        if row is None:
            return False
        row.ahead = False
        return True

    async def heartbeat(self, job_id: str, ref: ClaimRef, visibility_ms: int) -> HeartbeatResult:
        if visibility_ms < 1:
            raise InvariantError("visibility_ms must be at least 1")
        row = self.state.rows.get(job_id)
        if row is None:
            return "lost"
        if (
            row.state == "cancelled"
            and row.cancelled_claim == ref.claim
            and row.claimed_by == ref.worker_id
        ):
            return "cancelled"
        owned = self.state.owned(job_id, ref)
        if owned is None:
            return "lost"
        now = self.clock.now_ms()
        owned.lease_expires_at_ms = now + visibility_ms
        owned.updated_at_ms = now
        return "renewed"

    # -- steps --------------------------------------------------------------------------
    async def load_steps(self, run_id: str, *, tenant_id: str | None) -> list[StepRecord]:
        stored = self.state.ordered_steps(run_key(tenant_id, run_id))
        return [replace(s, output=json_copy(s.output)) for s in stored]

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
        row = self.state.owned(job_id, ref)
        if row is None or row.run_id != run_id:
            return False
        steps = self.state.steps.setdefault(row.run_key(), {})
        if name not in steps:
            # The first write of a name wins: a step is a fact about the run, never rewritten.
            steps[name] = StepRecord(
                name=name,
                output=json_copy(output),
                seq=self.state.next_seq(),
                started_at_ms=started_at_ms,
                finished_at_ms=self.clock.now_ms(),
            )
        return True

    # -- stats --------------------------------------------------------------------------
    async def stats(self) -> DriverStats:
        now = self.clock.now_ms()
        counts: dict[str, dict[str, int]] = {
            q: dict.fromkeys(ALL_STATES, 0) | {"due": 0} for q in self.state.paused_queues
        }
        oldest: dict[str, int] = {}
        for row in self.state.rows.values():
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
                    capped=frozenset(),  # every row is in memory: every figure is exact
                    **c,
                )
                for q, c in counts.items()
            }
        )

    async def close(self) -> None:
        self._closed = True


def memory_driver(*, clock: Clock = SYSTEM_CLOCK) -> MemoryDriver:
    """A fresh in-process driver."""
    return MemoryDriver(clock=clock)


__all__ = ["MemoryDriver", "memory_driver"]
