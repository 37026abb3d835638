"""Cron resolution in a zone: DST on both switch days, seconds, and the skip bisection.

The reference below enumerates INSTANTS (every minute of real time) and applies the DST rule
written in ``shared/scheduler/cron.py``'s docstring; the resolver walks WALL times. Two formulations
of one rule, compared over every switch day of several zones.
"""

from __future__ import annotations

import zoneinfo
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from croniter import croniter

from ujobs.errors import TaskDeclarationInvalidError
from ujobs.jobs.task import TaskEntry, task
from ujobs.scheduler.cron import (
    cron_schedule,
    is_fixed_time,
    latest_occurrence,
    next_occurrence,
    next_task_run,
)

NY = zoneinfo.ZoneInfo("America/New_York")


def ms(at: datetime) -> int:
    return int(at.timestamp() * 1000)


def local(at_ms: int, zone: zoneinfo.ZoneInfo = NY) -> datetime:
    return datetime.fromtimestamp(at_ms / 1000, zone)


def occurrences(expr: str, tz: str, start_ms: int, end_ms: int) -> list[int]:
    """Walk the resolver from ``start_ms`` and collect every occurrence before ``end_ms``."""
    schedule = cron_schedule(expr, tz)
    found = []
    at = schedule.next_after(start_ms)
    while at is not None and at < end_ms:
        found.append(at)
        at = schedule.next_after(at)
    return found


def day_window(year: int, month: int, day: int) -> tuple[int, int]:
    start = datetime(year, month, day, tzinfo=NY)
    return ms(start) - 1, ms(datetime(year, month, day + 1, tzinfo=NY))


# -- the documented DST behaviour of `0 2 * * *` in America/New_York -----------------------


def test_daily_0200_on_spring_forward_fires_once_at_0300_edt() -> None:
    # 2024-03-10: 02:00 EST becomes 03:00 EDT; 02:00 does not exist.
    fired = occurrences("0 2 * * *", "America/New_York", *day_window(2024, 3, 10))
    assert len(fired) == 1
    assert local(fired[0]).strftime("%H:%M %Z") == "03:00 EDT"
    assert fired[0] == ms(datetime(2024, 3, 10, 7, 0, tzinfo=UTC))


def test_daily_0200_on_fall_back_fires_once_at_0200_est() -> None:
    # 2024-11-03: 02:00 EDT becomes 01:00 EST; 01:00-01:59 happens twice, 02:00 once.
    fired = occurrences("0 2 * * *", "America/New_York", *day_window(2024, 11, 3))
    assert len(fired) == 1
    assert local(fired[0]).strftime("%H:%M %Z") == "02:00 EST"
    assert fired[0] == ms(datetime(2024, 11, 3, 7, 0, tzinfo=UTC))


def test_daily_0200_is_daily_around_both_switches() -> None:
    # Days before and after each switch: one fire a day, at 02:00 local.
    for month, day in ((3, 9), (3, 11), (11, 2), (11, 4)):
        fired = occurrences("0 2 * * *", "America/New_York", *day_window(2024, month, day))
        assert [local(f).strftime("%H:%M") for f in fired] == ["02:00"]


def test_fixed_time_in_the_repeated_hour_fires_once_at_the_first_pass() -> None:
    fired = occurrences("30 1 * * *", "America/New_York", *day_window(2024, 11, 3))
    assert [local(f).strftime("%H:%M %Z") for f in fired] == ["01:30 EDT"]


def test_wildcard_hour_runs_on_real_time_through_both_switches() -> None:
    fall = occurrences("0 * * * *", "America/New_York", *day_window(2024, 11, 3))
    assert len(fall) == 25  # a 25-hour day, every hour once
    assert [local(f).strftime("%H:%M %Z") for f in fall[1:3]] == ["01:00 EDT", "01:00 EST"]
    spring = occurrences("15 * * * *", "America/New_York", *day_window(2024, 3, 10))
    assert len(spring) == 23  # 02:15 names no instant
    assert [local(f).strftime("%H:%M %Z") for f in spring[1:3]] == ["01:15 EST", "03:15 EDT"]


def test_several_wall_times_in_one_gap_are_one_fire() -> None:
    fired = occurrences("0,30 2 * * *", "America/New_York", *day_window(2024, 3, 10))
    assert [local(f).strftime("%H:%M %Z") for f in fired] == ["03:00 EDT"]


def test_no_instant_fires_twice_and_occurrences_strictly_increase() -> None:
    for expr in ("0 2 * * *", "30 1 * * *", "*/20 * * * *", "0 * * * *", "* * * * * */30"):
        for switch in (datetime(2024, 3, 10, 7, tzinfo=UTC), datetime(2024, 11, 3, 6, tzinfo=UTC)):
            window = (ms(switch) - 2 * 3_600_000, ms(switch) + 2 * 3_600_000)
            fired = occurrences(expr, "America/New_York", *window)
            assert fired, expr
            assert fired == sorted(set(fired)), expr


def test_fixed_time_is_decided_by_the_minute_hour_and_seconds_fields() -> None:
    assert is_fixed_time("0 2 * * *")
    assert is_fixed_time("0,30 1-3 * * *")
    assert is_fixed_time("@daily")
    assert is_fixed_time("0 2 * * * 15")
    assert not is_fixed_time("0 * * * *")
    assert not is_fixed_time("*/15 1 * * *")
    assert not is_fixed_time("@hourly")
    assert not is_fixed_time("0 2 * * * *")


# -- against an instant-by-instant reference, over every switch day of several zones -------


def matcher(expr: str) -> Callable[[datetime], bool]:
    """A wall-time matcher for minute/hour cron lines (the day fields of EXPRESSIONS are all
    ``*``), from croniter's field parser only — not from its iteration."""
    (minutes, hours, *days), _ = croniter.expand(expr)
    assert all(field == ["*"] for field in days)

    def match(wall: datetime) -> bool:
        return (minutes == ["*"] or wall.minute in minutes) and (
            hours == ["*"] or wall.hour in hours
        )

    return match


def reference(expr: str, zone: zoneinfo.ZoneInfo, start_ms: int, end_ms: int) -> list[int]:
    """Every minute of real time whose wall time matches — minus the repeated pass of a
    fixed-time cron — plus the end of each gap a fixed-time cron named a wall time in."""
    fixed = is_fixed_time(expr)
    matches = matcher(expr)
    found: set[int] = set()
    at = start_ms - start_ms % 60_000
    prev_wall: datetime | None = None
    while at < end_ms:
        moment = datetime.fromtimestamp(at / 1000, zone)
        wall = moment.replace(tzinfo=None)
        if matches(wall) and not (fixed and moment.fold == 1):
            found.add(at)
        if fixed and prev_wall is not None and wall - prev_wall > timedelta(minutes=1):
            skipped = prev_wall + timedelta(minutes=1)
            while skipped < wall:
                if matches(skipped):
                    found.add(at)  # transitions here fall on whole minutes
                    break
                skipped += timedelta(minutes=1)
        prev_wall = wall
        at += 60_000
    return sorted(o for o in found if start_ms < o < end_ms)


SWITCH_DAYS = [
    ("America/New_York", (2024, 3, 10)),
    ("America/New_York", (2024, 11, 3)),
    ("Europe/Berlin", (2024, 3, 31)),
    ("Europe/Berlin", (2024, 10, 27)),
    ("Australia/Lord_Howe", (2024, 4, 7)),  # a 30-minute fall-back
    ("Australia/Lord_Howe", (2024, 10, 6)),
    ("Pacific/Chatham", (2024, 4, 7)),  # a +12:45 / +13:45 zone
    ("UTC", (2024, 3, 10)),
]
EXPRESSIONS = [
    "0 2 * * *",
    "30 1 * * *",
    "15 2 * * *",
    "45 2 * * *",
    "0,30 1-3 * * *",
    "*/10 * * * *",
    "0 * * * *",
    "15 * * * *",
    "*/5 2 * * *",
    "59 1 * * *",
]


@pytest.mark.parametrize(("tz", "day"), SWITCH_DAYS)
def test_resolver_matches_the_instant_reference(tz: str, day: tuple[int, int, int]) -> None:
    zone = zoneinfo.ZoneInfo(tz)
    start = ms(datetime(*day, tzinfo=zone) - timedelta(hours=2))
    end = ms(datetime(*day, tzinfo=zone) + timedelta(hours=27))
    for expr in EXPRESSIONS:
        expected = reference(expr, zone, start, end)
        assert occurrences(expr, tz, start, end) == expected, (tz, expr)
        # ... and from any instant, the next occurrence is the reference's next.
        schedule = cron_schedule(expr, tz)
        checked = 0
        for after in range(start, end, 7 * 60_000 + 13_000):
            want = next((o for o in expected if o > after), None)
            if want is not None:  # past the window's last occurrence the reference is silent
                assert schedule.next_after(after) == want, (tz, expr, after)
                checked += 1
        assert checked >= 1, (tz, expr)


# -- seconds, strictness, never ------------------------------------------------------------


def test_six_fields_put_seconds_last_and_task_accepts_them() -> None:
    @task(cron="* * * * * */20", tz="UTC")
    def every_twenty_seconds(occurrence_ms: int) -> list[TaskEntry]:
        return []

    start = ms(datetime(2024, 1, 1, tzinfo=UTC))
    at = next_occurrence(every_twenty_seconds, start)
    assert at == start + 20_000
    assert next_occurrence(every_twenty_seconds, start + 20_000) == start + 40_000
    assert next_occurrence(every_twenty_seconds, start + 59_999) == start + 60_000


def test_next_is_strictly_after_at_millisecond_precision() -> None:
    schedule = cron_schedule("0 3 * * *", "UTC")
    three = ms(datetime(2024, 5, 1, 3, tzinfo=UTC))
    assert schedule.next_after(three - 1) == three
    assert schedule.next_after(three) == three + 86_400_000


def test_a_cron_that_names_no_day_never_fires() -> None:
    assert cron_schedule("0 0 30 2 *", "UTC").next_after(0) is None


def test_task_refuses_a_cron_line_that_does_not_parse() -> None:
    with pytest.raises(TaskDeclarationInvalidError):
        task(cron="61 * * * *", tz="UTC", name="bad-cron", enqueue=lambda _ms: [])


def test_next_task_run_answers_without_a_scheduler() -> None:
    digest = task(cron="0 3 * * *", tz="America/New_York", name="digest", enqueue=lambda _: [])
    now = ms(datetime(2024, 6, 1, 12, tzinfo=NY))
    assert next_task_run(digest, now) == ms(datetime(2024, 6, 2, 3, tzinfo=NY))


# -- the skip bisection: the TRUE latest, in ~log2(gap in ms) resolutions ------------------


def walk_latest(expr: str, after: int, until: int) -> int | None:
    found = occurrences(expr, "UTC", after, until + 1)
    return found[-1] if found else None


@pytest.mark.parametrize(
    ("expr", "gap_ms", "max_evaluations"),
    [
        ("0 * * * *", 3 * 3_600_000, 25),
        ("*/7 * * * *", 3 * 3_600_000, 25),
        ("* * * * * *", 3 * 3_600_000, 25),
        ("0 * * * *", 365 * 86_400_000, 36),
        ("17 3 * * *", 365 * 86_400_000, 36),
        ("* * * * *", 365 * 86_400_000, 36),
    ],
)
def test_bisection_finds_the_true_latest_cheaply(
    expr: str, gap_ms: int, max_evaluations: int
) -> None:
    after = ms(datetime(2024, 2, 3, 4, 5, 6, tzinfo=UTC)) + 789
    until = after + gap_ms
    latest = latest_occurrence(cron_schedule(expr, "UTC"), after, until)
    assert latest.occurrence_ms is not None
    assert cron_schedule(expr, "UTC").next_after(latest.occurrence_ms) > until  # type: ignore[operator]
    if gap_ms <= 3 * 3_600_000:
        assert latest.occurrence_ms == walk_latest(expr, after, until)
    assert latest.evaluations <= max_evaluations


def test_bisection_with_nothing_missed_answers_none_in_one_evaluation() -> None:
    after = ms(datetime(2024, 2, 3, 4, 5, tzinfo=UTC))
    latest = latest_occurrence(cron_schedule("0 3 * * *", "UTC"), after, after + 60_000)
    assert latest.occurrence_ms is None
    assert latest.evaluations == 1


def test_bisection_includes_an_occurrence_exactly_at_the_end_of_the_window() -> None:
    schedule = cron_schedule("0 * * * *", "UTC")
    hour = ms(datetime(2024, 2, 3, 10, tzinfo=UTC))
    assert latest_occurrence(schedule, hour - 3 * 3_600_000, hour).occurrence_ms == hour
    assert latest_occurrence(schedule, hour - 1, hour).occurrence_ms == hour


def test_bisection_across_a_dst_switch_agrees_with_the_walk() -> None:
    schedule = cron_schedule("30 1 * * *", "America/New_York")
    after = ms(datetime(2024, 10, 1, tzinfo=NY))
    until = ms(datetime(2024, 11, 3, 12, tzinfo=NY))
    found = occurrences("30 1 * * *", "America/New_York", after, until + 1)
    assert latest_occurrence(schedule, after, until).occurrence_ms == found[-1]
    assert local(found[-1]).strftime("%m-%d %H:%M %Z") == "11-03 01:30 EDT"
