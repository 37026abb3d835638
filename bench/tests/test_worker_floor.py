"""bench/worker_floor.py's drain: every row of its bare table is claimed, run and acked once
(a floor that lost or skipped rows would report a CPU per job no worker can reach)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.support import services

BENCH = Path(__file__).resolve().parents[1]


def worker_floor() -> ModuleType:
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    return importlib.import_module("worker_floor")


async def test_the_floor_drains_every_row_once_and_reports_its_cpu_per_job(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bench = worker_floor()
    seen: list[int] = []

    async def counting(value: object) -> None:
        assert isinstance(value, dict)
        seen.append(value["n"])

    monkeypatch.setattr(bench, "_noop", counting)
    figures = await bench.floor_drain(services._admin_dsn(), 700, 4)
    assert sorted(seen) == list(range(1, 701))
    assert figures["jobs_per_s"] > 0
    assert figures["cpu_ms_per_job"] > 0
