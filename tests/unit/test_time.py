"""Durations as the spec writes them, and the clocks every time decision reads."""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ujobs.clock import SYSTEM_CLOCK, Clock, FrozenClock, from_epoch_ms, to_epoch_ms
from ujobs.durations import duration_label, duration_ms
from ujobs.errors import InvariantError


@pytest.mark.parametrize(
    ("value", "ms"),
    [
        ("250ms", 250),
        ("10s", 10_000),
        ("1.5s", 1_500),
        ("5m", 300_000),
        ("2h", 7_200_000),
        ("3d", 259_200_000),
        ("1w", 604_800_000),
        (" 10s ", 10_000),
        (timedelta(minutes=2), 120_000),
        (1500, 1500),
        (2.6, 3),
        (0, 0),
    ],
)
def test_duration_ms(value: Any, ms: int) -> None:
    assert duration_ms(value) == ms


@pytest.mark.parametrize(
    "value",
    ["3 days", "10", "-5s", "s", "", -1, math.nan, math.inf, timedelta(seconds=-1), True, None],
)
def test_a_duration_that_would_mean_something_else_is_refused(value: Any) -> None:
    with pytest.raises(InvariantError) as info:
        duration_ms(value, field="timeout")
    assert "timeout" in info.value.message


@given(st.integers(0, 10**12))
def test_duration_label_spells_the_same_duration(ms: int) -> None:
    assert duration_ms(duration_label(ms)) == ms


def test_duration_label_is_the_shortest_exact_spelling() -> None:
    assert duration_label(259_200_000) == "3d"
    assert duration_label(90_000) == "90s"
    assert duration_label(1_001) == "1001ms"


def test_a_frozen_clock_moves_only_when_told() -> None:
    clock = FrozenClock(1_000)
    assert isinstance(clock, Clock)
    assert clock.now_ms() == clock.now_ms() == 1_000
    assert clock.advance(500) == 1_500
    assert clock.set(datetime(2026, 1, 1, tzinfo=UTC)) == 1_767_225_600_000
    with pytest.raises(ValueError):
        clock.advance(-1)


def test_a_frozen_clock_starts_at_a_datetime() -> None:
    assert FrozenClock(datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC)).now_ms() == 1_000


def test_the_system_clock_reads_the_wall_clock() -> None:
    before = time.time_ns() // 1_000_000
    now = SYSTEM_CLOCK.now_ms()
    after = time.time_ns() // 1_000_000
    assert before <= now <= after


def test_a_naive_datetime_names_no_instant() -> None:
    with pytest.raises(ValueError):
        to_epoch_ms(datetime(2026, 1, 1))  # naive: the point of the test


@given(st.integers(0, 4_102_444_800_000))
def test_epoch_ms_round_trips_through_datetime(ms: int) -> None:
    assert to_epoch_ms(from_epoch_ms(ms)) == ms
