"""``rate=``: pacing between pages on a frozen clock."""

from __future__ import annotations

import pytest

from ujobs.clock import FrozenClock
from ujobs.exports.rate import RowRate, valid_rate


async def test_the_pace_waits_out_rows_read_faster_than_the_rate() -> None:
    clock = FrozenClock(0)
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        clock.advance(int(seconds * 1000))

    rate = RowRate(1000, clock=clock, sleep=sleep)
    rate.start()
    assert await rate.read(500) == pytest.approx(0.5)
    clock.advance(2000)  # a slow page: the budget it left over is spent on the next one
    assert await rate.read(1000) == 0.0
    assert await rate.read(2000) == pytest.approx(1.0)
    assert waits == [pytest.approx(0.5), pytest.approx(1.0)]


@pytest.mark.parametrize("value", [0, -1, float("inf"), float("nan"), True, "100", None])
def test_a_rate_must_be_a_positive_finite_number(value: object) -> None:
    assert not valid_rate(value)


def test_a_positive_rate_is_valid() -> None:
    assert valid_rate(250)
    assert valid_rate(0.5)
