"""The order ``bench/backlog_scaling.py`` measures its scenarios in, and its progress lines.

The load of a shared machine drifts over minutes and a drain's rate with it (two runs of one
scenario a few minutes apart read 5,486 and 9,540 jobs/s): whichever scenario runs first or
last would carry the drift into every ratio. ``both_ways`` measures each scenario twice, first
to last then back, after one unreported warm-up run, and reports each figure's mean.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

K = TypeVar("K")


def note(message: str) -> None:
    print(f"  [{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


async def both_ways(
    keys: list[K], says: Callable[[K], str], measure_one: Callable[[K], Awaitable[dict[str, Any]]]
) -> list[tuple[K, dict[str, Any]]]:
    """Each scenario measured twice, in the order first to last then last to first, and each
    figure the mean of its two runs: the load of a shared machine drifts over minutes, and
    this order cancels a steady drift out of the ratios instead of charging it to whichever
    scenario ran first. An unreported run of the first scenario warms the process and the
    server's caches before any figure counts (it read 40 % below its second run without)."""
    note("warm-up (not reported): " + says(keys[0]))
    await measure_one(keys[0])
    runs: dict[K, list[dict[str, Any]]] = {key: [] for key in keys}
    for key in [*keys, *reversed(keys)]:
        note(says(key))
        runs[key].append(await measure_one(key))
    return [(key, mean_of(runs[key])) for key in keys]


def mean_of(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The first run's entries, each number the mean over ``runs``; ``runs`` keeps each one's
    figures."""
    merged: dict[str, Any] = {}
    for key, value in runs[0].items():
        numbers = isinstance(value, (int, float)) and not isinstance(value, bool)
        merged[key] = round(statistics.fmean(r[key] for r in runs), 2) if numbers else value
    merged["runs"] = [
        {k: v for k, v in r.items() if isinstance(v, (int, float)) and k != "backlog"} for r in runs
    ]
    return merged
