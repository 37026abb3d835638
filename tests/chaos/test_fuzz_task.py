"""Bad input at ``task()``: cron lines and time zones from a fuzzer. Each answers a task
whose schedule resolves, or an ``X_…`` error — never another exception."""

from __future__ import annotations

import itertools
import zoneinfo
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ujobs import task
from ujobs.errors import UltimateError
from ujobs.scheduler.cron import schedule_of

pytestmark = pytest.mark.chaos

ZONES = sorted(zoneinfo.available_timezones())
_names = itertools.count()

TOKEN = st.one_of(
    st.sampled_from(["*", "?", "L", "W", "#", "H", "R", "/", "-", ",", "JAN", "MON", "sun"]),
    st.integers(min_value=-5, max_value=100).map(str),
    st.from_regex(r"\A[0-9*]{1,3}([-/,#][0-9LW]{1,3}){0,3}\Z"),
    st.text(max_size=4),
)
FIELDS = st.lists(TOKEN, min_size=1, max_size=8).map(" ".join)
ALIASES = st.sampled_from(["@daily", "@hourly", "@reboot", "@yearly", "@DAILY", "@", "@every 5s"])
CRON = st.one_of(FIELDS, ALIASES, st.text(max_size=40), st.just("0 3 * * *\x00"))
TZ = st.one_of(
    st.sampled_from(ZONES),
    st.sampled_from(ZONES).map(str.lower),
    st.sampled_from(ZONES).map(lambda z: z + "\x00"),
    st.sampled_from(["../../etc/passwd", "/etc/localtime", "UTC ", " UTC", "Bogota", "posix/UTC"]),
    st.text(max_size=40),
)


def _declare(cron: Any, tz: Any) -> Any:
    return task(name=f"fuzz-{next(_names)}", cron=cron, tz=tz, enqueue=lambda _at: [])


@given(cron=CRON, tz=TZ)
def test_a_fuzzed_cron_line_and_zone_answer_a_task_or_an_x_error(cron: str, tz: str) -> None:
    try:
        handle = _declare(cron, tz)
    except UltimateError as exc:
        refused: str | None = exc.code
    else:
        refused = None
    if refused is not None:
        assert refused.startswith("X_")
        return
    # Accepted: the scheduler can resolve it without raising.
    after = schedule_of(handle).next_after(1_796_428_800_000)
    assert after is None or after > 1_796_428_800_000


@given(cron=st.one_of(st.none(), st.integers(), st.binary(max_size=8), st.lists(st.text())))
def test_a_cron_that_is_not_a_string_is_an_x_error(cron: Any) -> None:
    with pytest.raises(UltimateError) as raised:
        _declare(cron, "UTC")
    assert raised.value.code.startswith("X_")


@given(tz=st.one_of(st.none(), st.integers(), st.binary(max_size=8), st.floats()))
def test_a_zone_that_is_not_a_string_is_an_x_error(tz: Any) -> None:
    with pytest.raises(UltimateError) as raised:
        _declare("* * * * *", tz)
    assert raised.value.code.startswith("X_")
