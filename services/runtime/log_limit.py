"""At most one log line per reason per window, the lines left out counted on the next one.

A failure that repeats per message (a poison message redelivered, a requester sending the
same broken body) would otherwise write one line per occurrence: thousands a second, drowning
every other line and the disk. ``LogLimiter.warn(log, event, reason, ...)`` writes the first
line of a reason, then nothing for that reason until ``every_ms`` has passed on the limiter's
clock; the next line it writes carries ``suppressed``: how many it left out meanwhile (so
``lines + sum(suppressed)`` is every occurrence). A reason is whatever names the failure's
kind, ``(event, code)`` typically: never a per-message value, or nothing would be limited.

Reasons are kept in a bounded table (``max_reasons``, least recently written out first): a
caller that mints reasons without end costs memory no more than that, and a reason evicted
simply writes its next line at once (with its count lost, never a line withheld for ever).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from ujobs.clock import SYSTEM_CLOCK, Clock

DEFAULT_EVERY_MS = 10_000
"""One line per reason per ten seconds: a failure that persists still shows every window."""
DEFAULT_MAX_REASONS = 1_024


@dataclass(slots=True)
class _Window:
    opened_ms: int
    suppressed: int = 0


class LogLimiter:
    """``admit(reason)`` decides; ``warn`` / ``log`` decide and write."""

    def __init__(
        self,
        every_ms: int = DEFAULT_EVERY_MS,
        *,
        clock: Clock = SYSTEM_CLOCK,
        max_reasons: int = DEFAULT_MAX_REASONS,
    ) -> None:
        if every_ms < 0 or max_reasons < 1:
            raise ValueError("every_ms is 0 or more and max_reasons 1 or more")
        self.every_ms = every_ms
        self.clock = clock
        self.max_reasons = max_reasons
        self._windows: OrderedDict[Hashable, _Window] = OrderedDict()

    def admit(self, reason: Hashable) -> int | None:
        """None: leave this line out (counted); else write it, with this many left out
        since the reason's last line."""
        now = self.clock.now_ms()
        window = self._windows.get(reason)
        if window is not None and now - window.opened_ms < self.every_ms:
            window.suppressed += 1
            return None
        suppressed = 0 if window is None else window.suppressed
        self._windows[reason] = _Window(opened_ms=now)
        self._windows.move_to_end(reason)
        while len(self._windows) > self.max_reasons:
            self._windows.popitem(last=False)
        return suppressed

    def log(
        self,
        logger: logging.Logger,
        level: int,
        event: str,
        reason: Hashable,
        *,
        exc_info: BaseException | None = None,
        **fields: Any,
    ) -> bool:
        """Write ``event`` with ``fields`` (and ``suppressed``) unless ``reason`` has had its
        line this window; answers whether it wrote."""
        suppressed = self.admit(reason)
        if suppressed is None:
            return False
        logger.log(level, event, exc_info=exc_info, extra={**fields, "suppressed": suppressed})
        return True

    def warn(
        self,
        logger: logging.Logger,
        event: str,
        reason: Hashable,
        *,
        exc_info: BaseException | None = None,
        **fields: Any,
    ) -> bool:
        return self.log(logger, logging.WARNING, event, reason, exc_info=exc_info, **fields)


__all__ = ["DEFAULT_EVERY_MS", "LogLimiter"]
