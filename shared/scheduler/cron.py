"""Occurrences of a task's cron line in its IANA zone, as epoch-millisecond instants.

ONE resolver answers everything: ``next_occurrence(task, after_ms)``, the first occurrence
strictly after an instant. The scheduler's due times, ``next_task_run`` (the operator's "next
fire", no scheduler needed) and the ``skip`` bisection all ask it, so the daylight-saving rules
below are decided in exactly one place and cannot drift between callers.

The cron line is matched against the task's local WALL-CLOCK time (croniter over naive
datetimes: five fields, or six with seconds as the LAST field, croniter's layout), then each
matching wall time is mapped to the instants it names. Two DST facts make that mapping more
than a conversion, and the rule for them is ISC (Vixie) cron's, because it is the one operators
already expect:

* A *fixed-time* cron — its minute and hour fields (and its seconds field, when it has one)
  contain no ``*`` — runs once per wall time it names:

  - **spring forward** (the wall time does not exist): it fires ONCE at the first instant after
    the gap. ``0 2 * * *`` in ``America/New_York`` on 2024-03-10 fires at 03:00 EDT
    (07:00 UTC); several wall times inside one gap are one fire.
  - **fall back** (the wall time happens twice): it fires once, at the FIRST of the two
    instants (daylight time). ``30 1 * * *`` fires at 01:30 EDT and not again at 01:30 EST.
    ``0 2 * * *`` is not in the repeated hour at all (01:00-01:59:59 repeats; 02:00 EDT is the
    instant the clocks go back), so on 2024-11-03 it fires once, at 02:00 EST (07:00 UTC).

  So ``0 2 * * *`` in New York fires exactly ONCE on each switch day.

* A *wildcard* cron (``*`` in its minute, hour or seconds field: ``0 * * * *``,
  ``*/15 1 * * *``, ``* * * * * *``) runs on real time: a wall time inside a spring-forward gap
  names no instant and is not run (``15 * * * *`` goes 01:15 EST → 03:15 EDT), and a repeated
  wall time is run at both of its instants (``0 * * * *`` fires at 01:00 EDT and 01:00 EST, an
  hour apart, as an hourly job should).

Either way an occurrence IS an instant, the set of them is a set, and the scheduler's watermark
only moves forward over instants: nothing fires twice for one instant.

Resolution assumes a zone's wall clock never jumps backward by more than
``MAX_BACKWARD_JUMP`` (3 hours). Every current zone's fall-back is one hour or less (Lord Howe's
is 30 minutes); a handful of pre-1995 changes were larger and are resolved as if 3 hours.
"""

from __future__ import annotations

import functools
import threading
import zoneinfo
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

from croniter import CroniterError, croniter

from ujobs.jobs.task import TaskHandle

MAX_BACKWARD_JUMP = timedelta(hours=3)
_JUMP_MS = int(MAX_BACKWARD_JUMP.total_seconds() * 1000)

# croniter's aliases, expanded only to decide fixed-time vs wildcard.
_ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


def is_fixed_time(expr: str) -> bool:
    """Whether a cron line names fixed wall times (no ``*`` in its minute, hour or seconds
    field) — the DST rule in this module's docstring differs between the two kinds."""
    fields = _ALIASES.get(expr.strip().lower(), expr).split()
    timed = [fields[0], fields[1]] + ([fields[5]] if len(fields) >= 6 else [])
    return not any(field.startswith("*") for field in timed)


@dataclass(frozen=True, slots=True)
class CronSchedule:
    """A cron line in a zone; answers occurrences as epoch-millisecond instants."""

    expr: str
    zone: zoneinfo.ZoneInfo
    fixed_time: bool

    def next_after(self, after_ms: int) -> int | None:
        """The first occurrence strictly after ``after_ms``; None when the line never matches
        again (``0 0 30 2 *`` parses, and names no day).

        Between two instants with no fall-back in between, wall time and real time move
        together, so the first matching wall time that names an instant past ``after_ms`` names
        the answer. A fall-back at ``T`` within reach splits the search in two: the walls before
        ``T`` (from ``after_ms``'s wall time up to the wall time ``T`` leaves), then — if none
        of them matched — the walls after ``T``, starting again from the wall time ``T``
        arrives at, where the repeated hour's second pass lives.
        """
        fall_back = self._fall_back_within(after_ms)
        if fall_back is None:
            return self._first_from(after_ms, self._wall(after_ms))
        turn_ms, jump_ms = fall_back
        arrives = self._wall(turn_ms)
        before = self._first_from(
            after_ms, self._wall(after_ms), until=arrives + timedelta(milliseconds=jump_ms)
        )
        if before is not None and before < turn_ms:
            return before
        return self._first_from(turn_ms - 1, arrives - timedelta(microseconds=1))

    def _first_from(
        self, after_ms: int, start: datetime, until: datetime | None = None
    ) -> int | None:
        """The earliest instant past ``after_ms`` named by the first matching wall after
        ``start`` (and before ``until``) that names one."""
        for wall in self._walls(start):
            if until is not None and wall >= until:
                return None
            later = [instant for instant in self._instants(wall) if instant > after_ms]
            if later:
                return min(later)
        return None

    def _wall(self, instant_ms: int) -> datetime:
        return datetime.fromtimestamp(instant_ms / 1000, self.zone).replace(tzinfo=None)

    def _fall_back_within(self, after_ms: int) -> tuple[int, int] | None:
        """``(T, jump)``: the instant in ``(after_ms, after_ms + MAX_BACKWARD_JUMP]`` the wall
        clock goes back at, and by how much (ms); None when it does not go back there."""
        horizon = after_ms + _JUMP_MS
        before, after = self._offset_ms(after_ms), self._offset_ms(horizon)
        if before <= after:
            return None
        low, high = after_ms, horizon  # offset(low) == before, offset(high) == after
        while high - low > 1:
            mid = (low + high) // 2
            if self._offset_ms(mid) == before:
                low = mid
            else:
                high = mid
        return high, before - after

    # -- the mapping from wall times to instants ---------------------------------------------

    def _walls(self, start: datetime) -> Iterator[datetime]:
        """Matching wall times strictly after ``start``, ascending (pure calendar: naive)."""
        it = _iterator(self.expr, start)
        while True:
            try:
                yield it.get_next(datetime)
            except CroniterError:
                return

    def _instants(self, wall: datetime) -> list[int]:
        """The occurrence instants one matching wall time names, per the DST rule."""
        early = wall.replace(tzinfo=self.zone, fold=0)
        late = wall.replace(tzinfo=self.zone, fold=1)
        t0 = _ms(early)
        t1 = _ms(late)
        if t0 == t1:
            return [t0]
        if self._exists(wall, t0):
            # Repeated (fall back): fold=0 is the first pass, in daylight time.
            return [t0] if self.fixed_time else [t0, t1]
        # Skipped (spring forward): fold=1 reads the wall with the new offset and lands before
        # the gap, fold=0 with the old one and lands after it; the gap ends between them.
        return [self._gap_end(t1, t0)] if self.fixed_time else []

    def _exists(self, wall: datetime, instant_ms: int) -> bool:
        back = datetime.fromtimestamp(instant_ms / 1000, self.zone).replace(tzinfo=None)
        return back == wall

    def _offset_ms(self, instant_ms: int) -> int:
        offset = datetime.fromtimestamp(instant_ms / 1000, self.zone).utcoffset()
        return int(offset.total_seconds() * 1000) if offset is not None else 0

    def _gap_end(self, before_ms: int, after_ms: int) -> int:
        """The instant a spring-forward gap ends: the first whole second, after ``before_ms``,
        already on ``after_ms``'s offset (transitions fall on whole seconds)."""
        target = self._offset_ms(after_ms)
        lo, hi = before_ms // 1000, -(-after_ms // 1000)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self._offset_ms(mid * 1000) == target:
                hi = mid
            else:
                lo = mid
        return hi * 1000


_iterators = threading.local()


def _iterator(expr: str, start: datetime) -> croniter:
    """A parsed croniter for ``expr``, moved to ``start`` — parsing is two thirds of a
    resolution. One per thread and expression; ``next_after`` never yields to another caller
    while walking one, so reusing it is safe."""
    cache: dict[str, croniter] = _iterators.__dict__.setdefault("by_expr", {})
    it = cache.get(expr)
    if it is None:
        it = cache[expr] = croniter(expr, start)
    else:
        it.set_current(start, force=True)
    return it


def _ms(at: datetime) -> int:
    return round(at.timestamp() * 1000)


@functools.lru_cache(maxsize=1024)
def cron_schedule(expr: str, tz: str) -> CronSchedule:
    """The schedule for a cron line in an IANA zone (cached: tasks are few and fixed)."""
    return CronSchedule(expr=expr, zone=zoneinfo.ZoneInfo(tz), fixed_time=is_fixed_time(expr))


def schedule_of(task: TaskHandle) -> CronSchedule:
    return cron_schedule(task.cron, task.tz)


def next_occurrence(task: TaskHandle, after_ms: int) -> int | None:
    """The task's first occurrence strictly after ``after_ms`` (epoch ms), or None if never."""
    return schedule_of(task).next_after(after_ms)


def next_task_run(task: TaskHandle, from_ms: int) -> int | None:
    """When the task next fires after ``from_ms``: the scheduler's own resolver, answered
    without a scheduler (``ujobs tasks list``, the dashboard)."""
    return next_occurrence(task, from_ms)


@dataclass(frozen=True, slots=True)
class Latest:
    """The latest occurrence in a window, and how many resolver calls finding it took."""

    occurrence_ms: int | None
    evaluations: int


def latest_occurrence(
    task: TaskHandle | CronSchedule, after_ms: int, until_ms: int, *, first_ms: int | None = None
) -> Latest:
    """The TRUE latest occurrence in ``(after_ms, until_ms]``, by bisection over the window.

    Only the forward resolver exists (see the module docstring), so the search asks it: with
    ``L`` an occurrence known to be in the window and no occurrence in ``[H, until_ms]``, the
    first occurrence at or after the midpoint either moves ``L`` up to it or moves ``H`` down to
    the midpoint. The window halves (at least) per call: about 25 calls for three hours, 35 for
    a year, whatever the cron — walking the occurrences instead would be 10,800 calls for a
    per-second task down three hours. ``first_ms`` (the window's first occurrence, when the
    caller already resolved it) saves one call.
    """
    schedule = task if isinstance(task, CronSchedule) else schedule_of(task)
    evaluations = 0
    low = first_ms
    if low is None:
        low = schedule.next_after(after_ms)
        evaluations += 1
    if low is None or low > until_ms:
        return Latest(None, evaluations)
    high = until_ms + 1
    while high - low > 1:
        mid = (low + high) // 2
        found = schedule.next_after(mid - 1)
        evaluations += 1
        if found is not None and found <= until_ms:
            low = found
        else:
            high = mid
    return Latest(low, evaluations)
