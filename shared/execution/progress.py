"""``run.progress(done, total, note=None)``: how far a run has got, written through the driver.

A body may call it as often as its loop turns, so it is synchronous and cheap: it records the
latest value and writes at most once per ``PROGRESS_INTERVAL_MS`` per run
(``driver.introspect.record_progress``, fenced on the claim). ``flush()`` writes the last value
before the settle (``force=True``, past the driver's own interval), so a finished run never shows
the progress of a second before it finished. A driver with no introspection records nothing.
A failed write is logged and dropped: progress is a report, never a reason to fail a run.
"""

from __future__ import annotations

import asyncio
import logging
import math
from typing import Any

from ujobs.clock import Clock
from ujobs.drivers.base import PROGRESS_INTERVAL_MS, ClaimRef, JobIntrospection
from ujobs.errors import InvariantError

log = logging.getLogger("ujobs.jobs")

MAX_PROGRESS_NOTE_LENGTH = 500


def _number(value: Any, field: str) -> float | int:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvariantError(f"progress {field} must be a finite number, got {value!r}")
    if value < 0:
        raise InvariantError(f"progress {field} must not be negative, got {value!r}")
    return value


class ProgressReporter:
    """``run.progress`` for one attempt."""

    def __init__(
        self,
        introspect: JobIntrospection | None,
        job_id: str,
        ref: ClaimRef,
        clock: Clock,
        interval_ms: int = PROGRESS_INTERVAL_MS,
    ) -> None:
        self._introspect = introspect
        self._job_id = job_id
        self._ref = ref
        self._clock = clock
        self._interval_ms = interval_ms
        self._latest: dict[str, Any] | None = None
        self._written: dict[str, Any] | None = None
        self._last_write_ms: int | None = None
        self._inflight: asyncio.Task[None] | None = None
        self._closed = False
        self.writes = 0

    @property
    def latest(self) -> dict[str, Any] | None:
        return None if self._latest is None else dict(self._latest)

    def __call__(self, done: float, total: float, note: str | None = None) -> None:
        done = _number(done, "done")
        total = _number(total, "total")
        if note is not None and not isinstance(note, str):
            raise InvariantError(f"progress note must be a string, got {type(note).__name__}")
        if self._closed:
            return  # the attempt is settled; an abandoned body reports nothing more
        value: dict[str, Any] = {
            "done": done,
            "total": total,
            "note": None if note is None else note[:MAX_PROGRESS_NOTE_LENGTH],
        }
        self._latest = value
        if self._introspect is None or self._inflight is not None:
            return
        now = self._clock.now_ms()
        if self._last_write_ms is not None and now - self._last_write_ms < self._interval_ms:
            return
        self._last_write_ms = now
        self._inflight = asyncio.get_running_loop().create_task(self._write(value, force=False))

    async def _write(self, value: dict[str, Any], *, force: bool) -> None:
        assert self._introspect is not None
        stamped = {**value, "atMs": self._clock.now_ms()}
        try:
            await self._introspect.record_progress(self._job_id, self._ref, stamped, force=force)
            self._written = value
            self.writes += 1
        except Exception as exc:
            log.warning(
                "jobs.progress.failed",
                extra={"job_id": self._job_id, "error": f"{type(exc).__name__}: {exc}"},
            )
        finally:
            if self._inflight is asyncio.current_task():
                self._inflight = None

    def close(self) -> bool:
        """Record nothing more (the row is about to leave ``running``); answers whether
        ``flush()`` has anything to do: a write in flight, or a value newer than the last
        written. A run that never reported progress settles without awaiting a flush."""
        self._closed = True
        if self._inflight is not None:
            return True
        latest = self._latest
        return self._introspect is not None and latest is not None and latest != self._written

    async def flush(self) -> None:
        """Before the settle: wait out a write in flight, then write the last value if newer.

        After this, further calls record nothing: the row is about to leave ``running``.
        """
        self._closed = True
        inflight = self._inflight
        if inflight is not None:
            await asyncio.wait({inflight})
        if self._introspect is None or self._latest is None or self._latest == self._written:
            return
        await self._write(self._latest, force=True)
