"""``run.progress()`` writes, throttled to one per ``PROGRESS_INTERVAL_MS`` per run.

A loop may report progress on every turn; the row takes at most one write a second. A report
inside the interval is kept here, not dropped: the settle of the run (ack or nack) carries the
last one into its own statement, so "the last before the settle" always lands with no extra
round trip. ``record_progress(..., force=True)`` writes at once regardless of the interval.
The state is per driver (per process), keyed by job id: one run holds one job id at a time.
"""

from __future__ import annotations

from ujobs.clock import Clock
from ujobs.drivers.base import PROGRESS_INTERVAL_MS

MAX_TRACKED = 10_000


class ProgressThrottle:
    def __init__(self, clock: Clock, interval_ms: int = PROGRESS_INTERVAL_MS) -> None:
        self._clock = clock
        self._interval_ms = interval_ms
        self._last_write: dict[str, int] = {}
        self._pending: dict[str, str] = {}

    def admit(self, job_id: str, progress_json: str, *, force: bool = False) -> bool:
        """True: write now (and the interval restarts). False: kept for the settle."""
        now = self._clock.now_ms()
        last = self._last_write.get(job_id)
        if not force and last is not None and now - last < self._interval_ms:
            self._pending[job_id] = progress_json
            return False
        if len(self._last_write) >= MAX_TRACKED:
            # Runs whose settle never came through this driver (a lost lease): forget the oldest.
            oldest = next(iter(self._last_write))
            self.forget(oldest)
        self._last_write.pop(job_id, None)
        self._last_write[job_id] = now
        self._pending.pop(job_id, None)
        return True

    def settle(self, job_id: str) -> str | None:
        """The report still to write when ``job_id`` settles (None: nothing pending)."""
        self._last_write.pop(job_id, None)
        return self._pending.pop(job_id, None)

    def forget(self, job_id: str) -> None:
        self._last_write.pop(job_id, None)
        self._pending.pop(job_id, None)
