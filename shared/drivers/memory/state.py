"""The memory driver's tables: the twins of x_jobs, x_job_steps, x_job_pauses, x_job_counters.

Every module of the memory driver (core operations, introspection, bulk operations, counters)
reads and writes this one ``MemoryState``, so a rule such as "a finished row frees its live key"
or "a run's steps go when its last row goes" lives here once instead of in each caller.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from ujobs.drivers.base import (
    COUNTER_TIERS,
    LIVE_STATES,
    AttemptError,
    ClaimRef,
    CounterKind,
    JobRow,
    JobState,
    StepRecord,
    TaskFire,
)
from ujobs.wake.local import signal_enqueued

JSONValue = Any
LiveKey = tuple[str, str, str]
RunKey = tuple[str, str]


def json_copy(value: JSONValue) -> JSONValue:
    """Store what Postgres would: JSON in, an equal but independent value out."""
    return orjson.loads(orjson.dumps(value))


@dataclass(slots=True)
class MemoryRow:
    """One job row. ``claim`` only ever grows, so an old ``ClaimRef`` can never match again."""

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
    progress_at_ms: int | None = None
    # The latest value the progress throttle held back, boxed so a None progress still counts;
    # the claim's ack or nack writes it, so the last report before a settle always lands.
    pending_progress: tuple[JSONValue] | None = None
    # The claim that was running when an operator cancelled the row: its heartbeat answers
    # 'cancelled' (stop quietly) rather than 'lost' (page someone).
    cancelled_claim: int | None = None
    # Attempts handed back uncounted because the store was unreachable (NackOptions
    # .unreachable_cap bounds it).
    unreachable_returns: int = 0
    # Claimed ahead of a free slot and not started yet (ClaimOptions.ahead_after): a lapsed
    # lease hands it out again with the same attempt.
    ahead: bool = False
    ahead_returns: int = 0
    traceparent: str | None = None
    enqueued_by: str | None = None
    # Enqueued with unique_for: once done it holds its key that long (EnqueueRequest).
    unique_for_ms: int | None = None
    # The highest debounce_seq this waiting run took (EnqueueRequest.debounce_seq).
    debounce_seq: int | None = None
    result: JSONValue = None
    # Snoozes taken by this run (ujobs.jobs.snooze); a requeue resets it.
    snoozes: int = 0
    # The newest counted failed attempts' errors (ATTEMPT_ERRORS_KEPT), oldest first.
    attempt_errors: list[AttemptError] = field(default_factory=list)
    # Children (x_jobs.parent_id and friends, migration 0027; ujobs.drivers.children).
    parent_id: str | None = None
    parent_detached: bool = False
    parent_waits: bool = False
    children_waited: int | None = None
    # 0 (handed out first) to 9: the claim's order is (priority, run_at_ms, seq).
    priority: int = 0

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
            result=json_copy(self.result),
            parent_id=self.parent_id,
            priority=self.priority,
        )

    def live_key(self) -> LiveKey:
        return live_key(self.name, self.tenant_id, self.idempotency_key)

    def run_key(self) -> RunKey:
        return run_key(self.tenant_id, self.run_id)

    def newest_first(self) -> tuple[int, str]:
        """The sort key of every listing: created_at, then id (UUIDv7 strings sort by time)."""
        return (self.created_at_ms, self.id)


def live_key(name: str, tenant_id: str | None, idempotency_key: str) -> LiveKey:
    """The one-live-run key: ``(name, coalesce(tenant_id, ''), idempotency_key)``."""
    return (name, tenant_id or "", idempotency_key)


def debounceable(row: MemoryRow, seq: int | None) -> bool:
    """Whether a debounced enqueue of ``debounce_seq`` ``seq`` may move ``row``: waiting to
    start, never claimed, and ``seq`` above the one the row took (when both have one)."""
    if row.state not in ("ready", "delayed") or row.claim != 0:
        return False
    return seq is None or row.debounce_seq is None or seq > row.debounce_seq


def run_key(tenant_id: str | None, run_id: str) -> RunKey:
    """What a run's steps are keyed by: ``(coalesce(tenant_id, ''), run_id)``. A ``run_id`` is
    chosen by the caller, so it is a namespace of its tenant (x_job_steps' primary key)."""
    return (tenant_id or "", run_id)


@dataclass(slots=True)
class Bucket:
    done: int = 0
    retried: int = 0
    failed: int = 0
    dead: int = 0
    duration_ms: int = 0


@dataclass(slots=True)
class MemoryState:
    rows: dict[str, MemoryRow] = field(default_factory=dict)
    # live key -> id of the live row holding it (the partial unique index over LIVE_STATES)
    live: dict[LiveKey, str] = field(default_factory=dict)
    # (tenant or "", run id) -> step name -> record
    steps: dict[RunKey, dict[str, StepRecord]] = field(default_factory=dict)
    paused_queues: set[str] = field(default_factory=set)
    # Tenant-fair claims (ujobs.drivers.fairness): each queue's cursor, each weighed tenant.
    fair_cursors: dict[str, str] = field(default_factory=dict)
    tenant_weights: dict[str, int] = field(default_factory=dict)
    paused_tasks: set[str] = field(default_factory=set)
    # (job name, bucket width ms, bucket start ms) -> counts
    counters: dict[tuple[str, int, int], Bucket] = field(default_factory=dict)
    task_fires: dict[str, TaskFire] = field(default_factory=dict)
    # (tenant or "", run id) -> how many rows carry it, so a delete knows when a run's steps go
    run_rows: dict[RunKey, int] = field(default_factory=dict)
    # live key -> id of the newest done row enqueued with unique_for (x_jobs_unique_done_idx)
    unique_done: dict[LiveKey, str] = field(default_factory=dict)
    seq: int = 0
    # Told the id of every row that reaches a finished state (the result waits' notification).
    on_finish: list[Callable[[str], None]] = field(default_factory=list)

    def next_seq(self) -> int:
        self.seq += 1
        return self.seq

    def count(self, job: str, kind: CounterKind, now_ms: int, duration_ms: int | None) -> None:
        """Move one counter in the current 1-minute bucket (the settle's own statement).

        ``duration_ms`` adds up for ``done`` only, so ``duration_ms / done`` is the mean time
        of a successful run.
        """
        width = COUNTER_TIERS[0][0]
        start = now_ms - now_ms % width
        bucket = self.counters.setdefault((job, width, start), Bucket())
        setattr(bucket, kind, getattr(bucket, kind) + 1)
        if duration_ms is not None and kind == "done":
            bucket.duration_ms += max(0, int(duration_ms))

    def owned(self, job_id: str, ref: ClaimRef) -> MemoryRow | None:
        """The row when it is ``running`` under exactly this claim: the fence of every write."""
        row = self.rows.get(job_id)
        if (
            row is None
            or row.state != "running"
            or row.claimed_by != ref.worker_id
            or row.claim != ref.claim
        ):
            return None
        return row

    def insert(self, row: MemoryRow) -> None:
        """Add a row; a live one takes its key (the caller checked the key was free)."""
        self.rows[row.id] = row
        run = row.run_key()
        self.run_rows[run] = self.run_rows.get(run, 0) + 1
        if row.state in LIVE_STATES:
            self.live[row.live_key()] = row.id

    def land_pending_progress(self, row: MemoryRow) -> None:
        """Write what the throttle held back, in the settle that ends the claim."""
        if row.pending_progress is not None:
            row.progress = row.pending_progress[0]
            row.pending_progress = None

    def finish(self, row: MemoryRow, state: JobState, now_ms: int) -> None:
        """Move a row to a finished state: it stops holding its live key and its lease."""
        row.state = state
        row.finished_at_ms = now_ms
        row.updated_at_ms = now_ms
        row.lease_expires_at_ms = None
        self.release_key(row)
        if state == "done" and row.unique_for_ms is not None:
            self.unique_done[row.live_key()] = row.id
        if row.parent_waits and row.parent_id is not None:
            self.child_finished(row.parent_id, now_ms)
        for tell in tuple(self.on_finish):
            tell(row.id)

    def child_finished(self, parent_id: str, now_ms: int) -> None:
        """A child its parent waits for ended: one off the parent's count; at zero a suspended
        parent is due now (ack.sql's ``woke``; ``ujobs.drivers.children``)."""
        parent = self.rows.get(parent_id)
        if parent is None or parent.children_waited is None:
            return
        left = parent.children_waited - 1
        if parent.state == "suspended" and left <= 0:
            parent.children_waited = None
            parent.run_at_ms = min(parent.run_at_ms, now_ms)
            signal_enqueued(parent.queue)  # this process's workers: the parent is due now
        else:
            parent.children_waited = left

    def descendants(self, parent_id: str) -> list[MemoryRow]:
        """The rows below ``parent_id`` a cancel of it reaches: its children and theirs, except
        those enqueued detached (and everything below them)."""
        found: list[MemoryRow] = []
        todo = [parent_id]
        while todo:
            current = todo.pop()
            for row in self.rows.values():
                if row.parent_id == current and not row.parent_detached:
                    found.append(row)
                    todo.append(row.id)
        return found

    def unique_holder(self, key: LiveKey, finished_after_ms: int) -> MemoryRow | None:
        """The done row enqueued with unique_for that holds ``key``, when it finished after
        ``finished_after_ms``."""
        held = self.unique_done.get(key)
        row = self.rows.get(held) if held is not None else None
        if (
            row is None
            or row.state != "done"
            or row.finished_at_ms is None
            or row.finished_at_ms <= finished_after_ms
        ):
            return None
        return row

    def release_key(self, row: MemoryRow) -> None:
        key = row.live_key()
        if self.live.get(key) == row.id:
            del self.live[key]

    def live_holder(self, row: MemoryRow) -> MemoryRow | None:
        """The live row holding ``row``'s key, if any (possibly ``row`` itself)."""
        holder = self.live.get(row.live_key())
        return self.rows.get(holder) if holder is not None else None

    def delete(self, row: MemoryRow) -> None:
        """Delete a row; its steps go too when no other row of its tenant shares its run."""
        if self.rows.pop(row.id, None) is None:
            return
        self.release_key(row)
        if self.unique_done.get(row.live_key()) == row.id:
            del self.unique_done[row.live_key()]
        run = row.run_key()
        left = self.run_rows.get(run, 1) - 1
        if left > 0:
            self.run_rows[run] = left
        else:
            self.run_rows.pop(run, None)
            self.steps.pop(run, None)

    def ordered_steps(self, run: RunKey) -> list[StepRecord]:
        """The steps of a run in the order they were saved. A run's steps are sequential (each
        is stored before the next starts), so that is their start order, with no dependence on
        which worker's clock stamped ``started_at``."""
        steps = self.steps.get(run, {})
        return sorted(steps.values(), key=lambda s: s.seq)
