"""What a worker says about itself: its state and ``stats()`` (the scaler's figures)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

WorkerState = Literal["new", "running", "draining", "stopped"]


@dataclass(frozen=True, slots=True)
class WorkerStats:
    """What a scaler and an operator read: ``in_flight`` (runs holding a pool slot: claimed,
    and not yet sent to be settled) and ``max_in_flight`` (None when uncapped), ``refused``
    (``when_busy='fail'`` refusals), and the rest of the counts: ``shed`` (over a
    ``LimitConfig`` cap), ``waited`` (handed back for a busy fleet slot), ``unknown`` (a job
    name this code does not declare), ``next_timer_ms`` (the earliest armed due timer)."""

    worker_id: str
    state: WorkerState
    in_flight: int
    max_in_flight: int | None
    capacity: int
    in_flight_by_queue: Mapping[str, int]
    claimed: int
    settled: int
    refused: int
    shed: int
    waited: int
    unknown: int
    passes: int
    next_timer_ms: int | None
