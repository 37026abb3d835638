"""Time as an injected dependency, so tests move time instead of sleeping.

Everything that decides by time (run_at, leases, backoff, cron) asks a ``Clock`` for epoch
milliseconds. The system clock is the default; ``FrozenClock`` only moves when a test says so.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Protocol, runtime_checkable


@runtime_checkable
class Clock(Protocol):
    """Epoch milliseconds; the one reading every time decision is made from."""

    def now_ms(self) -> int: ...


_shift_ms = 0
"""How far ``SystemClock`` reads ahead of the wall clock: 0 but in an end-to-end test."""


class SystemClock:
    """The wall clock (plus the test-only shift ``shift_system_clock`` set, 0 by default)."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000 + _shift_ms

    def __repr__(self) -> str:
        return "SystemClock()"


class FrozenClock:
    """A clock that stands still until ``advance()`` or ``set()`` moves it."""

    def __init__(self, start_ms: int | datetime = 1_700_000_000_000) -> None:
        self._now = to_epoch_ms(start_ms) if isinstance(start_ms, datetime) else int(start_ms)

    def now_ms(self) -> int:
        return self._now

    def advance(self, ms: int) -> int:
        if ms < 0:
            raise ValueError("a frozen clock only moves forward")
        self._now += int(ms)
        return self._now

    def set(self, at: int | datetime) -> int:
        self._now = to_epoch_ms(at) if isinstance(at, datetime) else int(at)
        return self._now

    def __repr__(self) -> str:
        return f"FrozenClock({self._now})"


SYSTEM_CLOCK: Clock = SystemClock()


def shift_system_clock(ms: int) -> None:
    """TEST-ONLY: make every ``SystemClock`` of this process read ``ms`` ahead of the wall
    clock (0 puts it back). A ``FrozenClock`` cannot cross a process boundary, so an end-to-end
    test moves the clock of the services it starts this way (``UJOBS_CLOCK_OFFSET_MS``, which
    only the services read): their time still passes, from an instant past the windows under
    test. Statements that read the database's own clock (the event bus) are not moved."""
    global _shift_ms
    if isinstance(ms, bool) or not isinstance(ms, int) or ms < 0:
        raise ValueError("the system clock only moves forward: a whole number of ms, 0 or more")
    _shift_ms = ms


def to_epoch_ms(at: datetime) -> int:
    """A timezone-aware datetime as epoch ms; a naive one is refused (it has no instant)."""
    if at.tzinfo is None:
        raise ValueError("a naive datetime names no instant; pass a timezone-aware one")
    # Integer arithmetic: timestamp() is a float, and float * 1000 truncates 1.001 s to 1000 ms.
    return (at - EPOCH) // _ONE_MS


def from_epoch_ms(ms: int) -> datetime:
    return EPOCH + timedelta(milliseconds=ms)


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_MS = timedelta(milliseconds=1)
