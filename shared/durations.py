"""Durations as the spec writes them: ``'3d'``, ``'10s'``, ``'250ms'``, or a ``timedelta``."""

from __future__ import annotations

import math
import re
from datetime import timedelta

from ujobs.errors import InvariantError

Duration = str | int | float | timedelta

_UNITS_MS: dict[str, float] = {
    "ms": 1,
    "s": 1_000,
    "m": 60_000,
    "h": 3_600_000,
    "d": 86_400_000,
    "w": 604_800_000,
}
_PATTERN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)\s*$")


def duration_ms(value: Duration, *, field: str = "duration") -> int:
    """Milliseconds for a duration; an int or float is already milliseconds.

    Refuses what would silently mean something else: a negative, NaN or infinite number, or
    a string in no unit we know (``'3 days'`` is refused rather than read as 3 ms).
    """
    if isinstance(value, bool):
        raise InvariantError(f"{field} must be a duration, got a boolean", meta={"field": field})
    if isinstance(value, timedelta):
        ms = value.total_seconds() * 1000
    elif isinstance(value, int | float):
        ms = float(value)
    elif isinstance(value, str):
        match = _PATTERN.match(value)
        if match is None:
            raise InvariantError(
                f"{field} {value!r} is not a duration; write e.g. '250ms', '10s', '5m', '3d'",
                meta={"field": field, "value": value},
            )
        ms = float(match.group(1)) * _UNITS_MS[match.group(2)]
    else:
        raise InvariantError(
            f"{field} must be a duration string, milliseconds or a timedelta",
            meta={"field": field},
        )
    if not math.isfinite(ms) or ms < 0:
        raise InvariantError(f"{field} must be finite and not negative", meta={"field": field})
    return round(ms)


def duration_label(ms: int) -> str:
    """The shortest exact spelling of ``ms`` (``259200000`` -> ``'3d'``); used for step names."""
    for unit in ("w", "d", "h", "m", "s"):
        size = int(_UNITS_MS[unit])
        if ms >= size and ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"
