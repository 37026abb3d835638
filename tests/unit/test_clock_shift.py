"""``shift_system_clock``: the test-only offset the services take from ``UJOBS_CLOCK_OFFSET_MS``,
so an end-to-end test can move the clock of processes it started. Forward only; 0 puts the wall
clock back; a ``FrozenClock`` is not touched."""

from __future__ import annotations

import time

import pytest

from ujobs.clock import SYSTEM_CLOCK, FrozenClock, shift_system_clock
from ujobs.errors import ConfigInvalidError
from ujobs.services.config.settings import read_common

DAY = 86_400_000


def test_the_system_clock_reads_ahead_by_the_shift_until_it_is_put_back() -> None:
    frozen = FrozenClock(5)
    try:
        shift_system_clock(30 * DAY)
        ahead = SYSTEM_CLOCK.now_ms() - time.time_ns() // 1_000_000
        assert 30 * DAY - 1_000 < ahead <= 30 * DAY
        assert frozen.now_ms() == 5
    finally:
        shift_system_clock(0)
    assert abs(SYSTEM_CLOCK.now_ms() - time.time_ns() // 1_000_000) < 1_000


@pytest.mark.parametrize("bad", [-1, 1.5, True])
def test_only_a_whole_forward_shift_is_taken(bad: object) -> None:
    with pytest.raises(ValueError, match="only moves forward"):
        shift_system_clock(bad)  # type: ignore[arg-type]


def test_the_services_read_the_offset_and_refuse_a_negative_one() -> None:
    env = {"DATABASE_URL": "postgresql://localhost/x"}
    assert read_common(env, "worker").clock_offset_ms == 0
    moved = read_common({**env, "UJOBS_CLOCK_OFFSET_MS": str(DAY)}, "worker")
    assert moved.clock_offset_ms == DAY
    with pytest.raises(ConfigInvalidError) as bad:
        read_common({**env, "UJOBS_CLOCK_OFFSET_MS": "-5"}, "worker")
    assert bad.value.meta["variable"] == "UJOBS_CLOCK_OFFSET_MS"
