"""``SchedulerOptions``: the scheduler's settings, validated once, frozen.

``tick_interval_ms`` is the longest wait between two rounds (a round comes sooner when a task
or the lease falls due first); a bad value is ``X_CONFIG_INVALID`` naming it.
``drain_on_shutdown=False`` keeps the scheduler out of the process lifecycle (it then stops
only when told). The watermark store and the leader are not options: they are what the
scheduler runs on (``job_scheduler(state=..., leader=...)``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ujobs.errors import ConfigInvalidError

DEFAULT_TICK_INTERVAL_MS = 1_000

__all__ = ["DEFAULT_TICK_INTERVAL_MS", "SchedulerOptions"]


@dataclass(frozen=True, slots=True)
class SchedulerOptions:
    """Everything a scheduler needs besides its driver, state, leader and tasks."""

    tick_interval_ms: int = DEFAULT_TICK_INTERVAL_MS
    drain_on_shutdown: bool = True

    def __post_init__(self) -> None:
        tick = self.tick_interval_ms
        if isinstance(tick, bool) or not isinstance(tick, int):
            raise ConfigInvalidError(
                "tick_interval_ms must be a whole number of milliseconds",
                meta={"option": "tick_interval_ms"},
            )
        if tick < 1:
            raise ConfigInvalidError(
                "tick_interval_ms must be at least 1", meta={"option": "tick_interval_ms"}
            )
