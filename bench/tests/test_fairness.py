"""bench/fairness.py's scenarios, small and untimed: behind a flood, the quiet tenants start in
the worker's first batch (fair) and only after the flood (strict); a drain hands out every job
once, fair or strict; weights 3:1 share the starts 3:1."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import asyncpg

BENCH = Path(__file__).resolve().parents[1]


def fairness() -> ModuleType:
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    return importlib.import_module("fairness")


async def test_quiet_tenants_start_in_the_first_batch_only_when_fair(
    pg_pool: asyncpg.Pool[Any],
) -> None:
    bench = fairness()
    fair = await bench.quiet_wait(pg_pool, 400, 5, fair=True)
    assert fair["capped"] is False
    assert fair["place"] <= bench.SLOTS  # started with the first slots, not behind the flood
    strict = await bench.quiet_wait(pg_pool, 400, 5, fair=False)
    assert strict["capped"] is False
    assert strict["place"] == 405  # first in, first out: after all 400 of the flood


async def test_a_drain_starts_every_job_once_fair_or_strict(pg_pool: asyncpg.Pool[Any]) -> None:
    bench = fairness()
    jobs = bench.spread(600, 60)
    assert len(jobs) == 600
    for fair in (True, False):
        await bench.drain(pg_pool, jobs, fair=fair)
        assert len(bench.STARTS.tenants) == 600
        assert len(set(bench.STARTS.tenants)) == 60


async def test_weights_three_to_one_share_the_starts_three_to_one(
    pg_pool: asyncpg.Pool[Any],
) -> None:
    shared = await fairness().weight_share(pg_pool, 800)
    assert shared["heavy"] + shared["light"] == 800
    assert shared["error"] <= 0.1
