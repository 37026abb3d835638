"""bench/queue_controls.py's debounce burst, small and untimed: every enqueue of the burst is
sent at once, and the count it reports is the rows the burst made (one per key), each holding
an input of its own key; every enqueue after a key's first moved that run."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import asyncpg

BENCH = Path(__file__).resolve().parents[1]


def queue_controls() -> ModuleType:
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    return importlib.import_module("queue_controls")


async def test_a_burst_over_a_few_keys_makes_one_run_per_key(pg_pool: asyncpg.Pool[Any]) -> None:
    figures = await queue_controls().debounce_burst(pg_pool, 300, 7)
    assert figures["debounce_runs"] == 7
    assert await pg_pool.fetchval("select count(*) from x_jobs") == 7
    assert figures["debounce_new"] == 7
    assert figures["debounce_moved"] == 300 - 7
    assert figures["debounce_own_input"] is True
    states = {r["state"] for r in await pg_pool.fetch("select state from x_jobs")}
    assert states == {"delayed"}


async def test_the_drains_with_and_without_priorities_drain_everything_in_order(
    pg_dsn: str, pg_pool: asyncpg.Pool[Any]
) -> None:
    """Small and untimed: both drains finish every job; the one with priorities hands them
    out band by band (its claims never go back to a higher priority); the report carries the
    ratio the issue's bar reads."""
    figures = await queue_controls().drains(pg_dsn, 300, 1)
    assert figures["drain_not_done"] == 0
    assert figures["priority_order_kept"] is True
    [round_] = figures["drain_rounds"]
    assert round_["claims_with"] > 1  # the order check compared claims, not one batch
    ratio = figures["ratios"]["drain_with_priorities_vs_without"]
    assert figures["targets"]["drain_with_priorities_vs_without"]["value"] == ratio
    rows = await pg_pool.fetch("select priority, count(*) as n from x_jobs group by 1 order by 1")
    assert [(r["priority"], r["n"]) for r in rows] == [(p, 30) for p in range(10)]
