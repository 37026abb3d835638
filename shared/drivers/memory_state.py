"""Side tables of the memory driver: pauses and counters (twins of x_job_pauses, x_job_counters)."""

from __future__ import annotations

from dataclasses import dataclass, field

from shared.drivers.base import COUNTER_TIERS, CounterKind


@dataclass(slots=True)
class Bucket:
    done: int = 0
    retried: int = 0
    failed: int = 0
    dead: int = 0
    duration_ms: int = 0


@dataclass(slots=True)
class MemoryState:
    paused_queues: set[str] = field(default_factory=set)
    paused_tasks: set[str] = field(default_factory=set)
    # (job name, bucket width ms, bucket start ms) -> counts
    counters: dict[tuple[str, int, int], Bucket] = field(default_factory=dict)

    def count(self, job: str, kind: CounterKind, now_ms: int, duration_ms: int | None) -> None:
        """Move one counter in the current 1-minute bucket (the settle's own statement)."""
        width = COUNTER_TIERS[0][0]
        start = now_ms - now_ms % width
        bucket = self.counters.setdefault((job, width, start), Bucket())
        setattr(bucket, kind, getattr(bucket, kind) + 1)
        if duration_ms is not None and kind == "done":
            bucket.duration_ms += max(0, int(duration_ms))
