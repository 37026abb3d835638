"""``LogLimiter``: one line per reason per window of its clock, the next counting the ones
left out, reasons kept in a bounded table."""

from __future__ import annotations

import logging

import pytest

from ujobs.clock import FrozenClock
from ujobs.services.runtime.log_limit import LogLimiter


def test_one_line_per_reason_per_window_then_the_count_left_out() -> None:
    clock = FrozenClock()
    limit = LogLimiter(1_000, clock=clock)
    assert [limit.admit("a") for _ in range(4)] == [0, None, None, None]
    assert limit.admit("b") == 0  # another reason has its own window
    clock.advance(999)
    assert limit.admit("a") is None
    clock.advance(1)
    assert limit.admit("a") == 4
    assert limit.admit("a") is None


def test_a_reason_evicted_from_the_table_writes_its_next_line_at_once() -> None:
    limit = LogLimiter(1_000, clock=FrozenClock(), max_reasons=2)
    assert (limit.admit("a"), limit.admit("b"), limit.admit("c")) == (0, 0, 0)
    assert limit.admit("a") == 0  # "a" was the oldest: forgotten, not withheld
    assert limit.admit("c") is None


def test_warn_writes_the_fields_and_the_count(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="t.limit")
    clock = FrozenClock()
    limit = LogLimiter(10, clock=clock)
    log = logging.getLogger("t.limit")
    written = [limit.warn(log, "t.failed", ("t", "X_INTERNAL"), code="X") for _ in range(3)]
    clock.advance(10)
    written.append(limit.warn(log, "t.failed", ("t", "X_INTERNAL"), code="X"))
    assert written == [True, False, False, True]
    assert [
        (r.getMessage(), r.__dict__["code"], r.__dict__["suppressed"]) for r in caplog.records
    ] == [
        ("t.failed", "X", 0),
        ("t.failed", "X", 2),
    ]
