"""``raise Snooze(seconds)``: put the job back to ``ready`` at now + ``seconds`` without
spending an attempt — the answer to "not yet" (a partner asks to come back later, a resource is
not there yet), which is not a failure.

Unlike a retry it has no backoff and records no error; the run keeps its saved steps (they
replay on the next attempt, as after a retry). A run snoozes at most ``MAX_SNOOZES`` times (a
requeue starts it again at zero): the next one dead-letters the row with ``X_JOB_SNOOZE_LIMIT``,
so a job that always snoozes cannot cycle for ever. Each snooze moves ``jobs_snoozed_total`` and
logs ``jobs.attempt.snoozed``.
"""

from __future__ import annotations

from datetime import timedelta

from ujobs.errors import InvariantError

MAX_SNOOZES = 100
"""The snoozes a run may take; the next one dead-letters it with ``X_JOB_SNOOZE_LIMIT``."""

MAX_SNOOZE_SECONDS = 30 * 24 * 3600
"""The longest one snooze may be: 30 days (a longer wait is a scheduled job or a sleep step)."""


class Snooze(Exception):
    """Raised by a job body (or ``run.snooze(seconds)``) to run again later, uncounted."""

    def __init__(self, seconds: float | timedelta) -> None:
        value = seconds.total_seconds() if isinstance(seconds, timedelta) else float(seconds)
        if not 0 <= value <= MAX_SNOOZE_SECONDS:
            raise InvariantError(
                f"Snooze takes 0 to {MAX_SNOOZE_SECONDS} seconds (30 days); got {value}",
                meta={"seconds": value},
            )
        super().__init__(f"snoozed for {value:g}s")
        self.delay_ms = round(value * 1000)


__all__ = ["MAX_SNOOZES", "MAX_SNOOZE_SECONDS", "Snooze"]
