"""The operator's row moves in memory: requeue, and the bulk requeue/remove/promote.

The single-row ``requeue`` and ``requeue_many`` share ``requeue_row`` so the two cannot drift:
a requeued row keeps its ``id`` and ``run_id`` (its completed steps replay from storage unless
``from_step`` drops them), starts again at attempt 0 (a fresh attempt budget — the operator is
asking for a new try, and the old count would bury it on its first lapse), keeps its ``claim``
counter (claims only grow, so a fence from before the requeue can never match the new run),
and is due now.

Bulk calls spend ``MAX_BULK_ROWS`` only on rows they can move and answer ``remaining`` as what
a second call could still move, so "call until zero" ends.
"""

from __future__ import annotations

from ujobs.drivers.base import (
    ALL_STATES,
    MAX_BULK_ROWS,
    PROMOTABLE_STATES,
    REQUEUEABLE_STATES,
    BulkFilter,
    BulkResult,
)
from ujobs.drivers.memory.state import LiveKey, MemoryRow, MemoryState, RunKey
from ujobs.errors import (
    InvariantError,
    JobDuplicateError,
    JobNotFoundError,
    JobNotPromotableError,
    JobNotRemovableError,
    JobNotRequeueableError,
)
from ujobs.masking import redact_key


def requeue_row(state: MemoryState, row: MemoryRow, now: int, from_step: str | None) -> None:
    """Move a finished row (whose key is free) back to ``ready``, due now."""
    row.state = "ready"
    row.run_at_ms = now
    row.attempt = 0
    row.finished_at_ms = None
    row.lease_expires_at_ms = None
    row.claimed_by = None
    row.cancelled_claim = None
    row.last_error = None
    row.result = None
    row.snoozes = 0
    row.progress = None
    row.progress_at_ms = None
    row.pending_progress = None
    row.updated_at_ms = now
    state.live[row.live_key()] = row.id
    if from_step is not None:
        drop_from_step(state, row.run_key(), from_step)


def drop_from_step(state: MemoryState, run: RunKey, from_step: str) -> None:
    """Drop ``from_step`` and every step saved after it (a run's steps are sequential), in the
    run of the row's own tenant only.

    A name the run never saved drops nothing: the run never reached it, so everything it did
    complete still stands and replays.
    """
    ordered = state.ordered_steps(run)
    names = [s.name for s in ordered]
    if from_step not in names:
        return
    steps = state.steps[run]
    for record in ordered[names.index(from_step) :]:
        del steps[record.name]


def requeue_one(state: MemoryState, job_id: str, now: int, from_step: str | None) -> MemoryRow:
    row = state.rows.get(job_id)
    if row is None:
        raise JobNotFoundError(
            f"no job {job_id} in the queue; find it with `ujobs jobs list --json`",
            meta={"id": job_id},
        )
    if row.state not in REQUEUEABLE_STATES:
        raise JobNotRequeueableError(
            f"job {job_id} is {row.state}; only a finished job (done, failed, dead, cancelled) "
            "can be requeued — cancel it first",
            meta={"id": job_id, "state": row.state},
        )
    holder = state.live_holder(row)
    if holder is not None:
        raise JobDuplicateError(
            f"job {holder.id} ({holder.state}) holds the idempotency key of {job_id}; "
            "requeueing would run the key twice",
            meta={"id": job_id, "holder": holder.id, "key": redact_key(row.idempotency_key)},
        )
    requeue_row(state, row, now, from_step)
    return row


def _matches(state: MemoryState, flt: BulkFilter) -> list[MemoryRow]:
    """The rows a bulk filter names, oldest first (created_at, then id)."""
    if flt.state not in ALL_STATES:
        raise InvariantError(f"unknown job state {flt.state!r}", meta={"state": flt.state})
    rows = [
        r
        for r in state.rows.values()
        if r.state == flt.state
        and (flt.queue is None or r.queue == flt.queue)
        and (flt.name is None or r.name == flt.name)
        and (flt.tenant_id is None or r.tenant_id == flt.tenant_id)
    ]
    rows.sort(key=MemoryRow.newest_first)
    return rows


def requeue_many(state: MemoryState, flt: BulkFilter, now: int) -> BulkResult:
    """Requeue finished rows; per key only the oldest moves, and a held key moves nothing."""
    if flt.state not in REQUEUEABLE_STATES:
        raise JobNotRequeueableError(
            f"requeue_many takes a finished state ({', '.join(REQUEUEABLE_STATES)}), "
            f"not {flt.state!r}",
            meta={"state": flt.state},
        )
    affected = 0
    remaining = 0
    counted: set[LiveKey] = set()
    for row in _matches(state, flt):
        key = row.live_key()
        if key in state.live or key in counted:
            continue  # held by a live job, or an older row of this key already answers for it
        if affected < MAX_BULK_ROWS:
            requeue_row(state, row, now, None)
            affected += 1
        else:
            counted.add(key)
            remaining += 1
    return BulkResult(affected=affected, remaining=remaining)


def remove_many(state: MemoryState, flt: BulkFilter) -> BulkResult:
    if flt.state == "running":
        raise JobNotRemovableError(
            "running jobs cannot be removed; cancel them first (`ujobs jobs cancel <id>`)",
            meta={"state": flt.state},
        )
    rows = _matches(state, flt)
    for row in rows[:MAX_BULK_ROWS]:
        state.delete(row)
    affected = min(len(rows), MAX_BULK_ROWS)
    return BulkResult(affected=affected, remaining=len(rows) - affected)


def is_waiting(row: MemoryRow, now: int) -> bool:
    """Promotable: delayed, or ready and backing off, with its run time still ahead."""
    return row.state in PROMOTABLE_STATES and row.run_at_ms > now


def promote_row(row: MemoryRow, now: int) -> None:
    row.state = "ready"
    row.run_at_ms = now
    row.updated_at_ms = now


def promote_one(state: MemoryState, job_id: str, now: int) -> MemoryRow:
    row = state.rows.get(job_id)
    if row is None:
        raise JobNotFoundError(f"no job {job_id} in the queue", meta={"id": job_id})
    if not is_waiting(row, now):
        raise JobNotPromotableError(
            f"job {job_id} is {row.state} and not waiting on its run time; nothing to promote",
            meta={"id": job_id, "state": row.state},
        )
    promote_row(row, now)
    return row


def promote_many(state: MemoryState, flt: BulkFilter, now: int) -> BulkResult:
    if flt.state not in PROMOTABLE_STATES:
        raise JobNotPromotableError(
            f"promote_many takes {' or '.join(PROMOTABLE_STATES)}, not {flt.state!r}",
            meta={"state": flt.state},
        )
    waiting = [r for r in _matches(state, flt) if is_waiting(r, now)]
    waiting.sort(key=lambda r: (r.run_at_ms, r.seq))
    for row in waiting[:MAX_BULK_ROWS]:
        promote_row(row, now)
    affected = min(len(waiting), MAX_BULK_ROWS)
    return BulkResult(affected=affected, remaining=len(waiting) - affected)


__all__ = [
    "drop_from_step",
    "is_waiting",
    "promote_many",
    "promote_one",
    "remove_many",
    "requeue_many",
    "requeue_one",
    "requeue_row",
]
