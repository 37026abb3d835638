"""Per-job counter history in memory: reads and the tier rollup over ``x_job_counters``' twin.

Settles write 1-minute buckets (``MemoryState.count``). ``COUNTER_TIERS`` bounds how long each
width is kept: a bucket that ENDED more than its tier's retention ago is folded into the bucket
of the next tier that contains it, and one past the last tier is dropped — 4,176 rows per job
name at most. Tiers are folded in order within one call, so a second call right after finds
nothing to do (the rollup is idempotent).
"""

from __future__ import annotations

from ujobs.drivers.base import COUNTER_TIERS, CounterBucket, CounterTotals
from ujobs.drivers.memory.state import Bucket, MemoryState


def _view(job: str, width: int, start: int, b: Bucket) -> CounterBucket:
    return CounterBucket(
        job=job,
        bucket_start_ms=start,
        width_ms=width,
        done=b.done,
        retried=b.retried,
        failed=b.failed,
        dead=b.dead,
        duration_ms=b.duration_ms,
    )


def counters(state: MemoryState, job: str, since_ms: int) -> list[CounterBucket]:
    """The buckets of ``job`` that end after ``since_ms``, oldest first."""
    rows = [
        _view(name, width, start, b)
        for (name, width, start), b in state.counters.items()
        if name == job and start + width > since_ms
    ]
    rows.sort(key=lambda r: (r.bucket_start_ms, r.width_ms))
    return rows


def counter_totals(state: MemoryState, since_ms: int) -> list[CounterTotals]:
    """Per job name, the sums of every bucket ending after ``since_ms``, by job name."""
    sums: dict[str, Bucket] = {}
    for (name, width, start), b in state.counters.items():
        if start + width <= since_ms:
            continue
        total = sums.setdefault(name, Bucket())
        total.done += b.done
        total.retried += b.retried
        total.failed += b.failed
        total.dead += b.dead
        total.duration_ms += b.duration_ms
    return [
        CounterTotals(
            job=name,
            done=t.done,
            retried=t.retried,
            failed=t.failed,
            dead=t.dead,
            duration_ms=t.duration_ms,
        )
        for name, t in sorted(sums.items())
    ]


def rollup_counters(state: MemoryState, now_ms: int) -> int:
    """Fold buckets past their tier into the next tier; answers how many buckets moved."""
    moved = 0
    for index, (width, keep) in enumerate(COUNTER_TIERS):
        expired = [
            key for key in state.counters if key[1] == width and key[2] + width <= now_ms - keep
        ]
        for key in expired:
            bucket = state.counters.pop(key)
            moved += 1
            if index + 1 == len(COUNTER_TIERS):
                continue  # past the last tier: history older than 30 days is dropped
            next_width = COUNTER_TIERS[index + 1][0]
            job, _, start = key
            target = state.counters.setdefault(
                (job, next_width, start - start % next_width), Bucket()
            )
            target.done += bucket.done
            target.retried += bucket.retried
            target.failed += bucket.failed
            target.dead += bucket.dead
            target.duration_ms += bucket.duration_ms
    return moved
