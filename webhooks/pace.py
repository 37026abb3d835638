"""Pacing one endpoint's POSTs to its ``rate_per_s``: each delivery reserves the next free
send instant, ``1 / rate`` after the previous one, and waits until then.

A ``Pace`` answers ``reserve(endpoint_id, rate_per_s)`` with the seconds to wait. Where the
reservations live decides what the rate bounds: ``LocalPace`` keeps them in this process (a
family of your own, tests), so N deliverers send N times the rate; the built-in families use
``PgPace`` (``ujobs.webhooks.pace_pg``), one row per endpoint in Postgres, so the rate holds across
the fleet however many deliverers run.
"""

from __future__ import annotations

import time
from typing import Protocol


class Pace(Protocol):
    async def reserve(self, endpoint_id: str, rate_per_s: float) -> float:
        """Seconds to wait before this POST may leave (0: now)."""
        ...


class LocalPace:
    """Reservations in this process's memory: the rate holds per process."""

    def __init__(self) -> None:
        self._next_at: dict[str, float] = {}

    async def reserve(self, endpoint_id: str, rate_per_s: float) -> float:
        now = time.monotonic()
        at = max(now, self._next_at.get(endpoint_id, 0.0))
        self._next_at[endpoint_id] = at + 1 / rate_per_s
        return at - now


__all__ = ["LocalPace", "Pace"]
