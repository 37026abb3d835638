"""``rate=``: rows a second an export may read, paced between pages.

An export is a bounded read somebody is usually waiting for, so it has no default rate; one big
enough to matter to the pool declares one. The pace is kept over the attempt: after each page
the pass waits until the rows read so far are no more than ``rate`` a second since it started.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from typing import Any

from ujobs.clock import SYSTEM_CLOCK, Clock

__all__ = ["RowRate", "valid_rate"]


def valid_rate(rate: Any) -> bool:
    return (
        not isinstance(rate, bool)
        and isinstance(rate, int | float)
        and math.isfinite(rate)
        and rate > 0
    )


class RowRate:
    """Paces an attempt's reads to ``rows_per_s``."""

    def __init__(
        self,
        rows_per_s: float,
        *,
        clock: Clock = SYSTEM_CLOCK,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    ) -> None:
        self.rows_per_s = float(rows_per_s)
        self._clock = clock
        self._sleep = sleep
        self._started_ms: int | None = None
        self._rows = 0

    def start(self) -> None:
        if self._started_ms is None:
            self._started_ms = self._clock.now_ms()

    async def read(self, rows: int) -> float:
        """Count ``rows`` just read and wait out any excess; answers the seconds waited."""
        self.start()
        assert self._started_ms is not None
        self._rows += rows
        due_ms = self._started_ms + self._rows * 1000 / self.rows_per_s
        wait_s = (due_ms - self._clock.now_ms()) / 1000
        if wait_s <= 0:
            return 0.0
        await self._sleep(wait_s)
        return wait_s
