"""bench/enqueue_client_micro.py: its batches go the harness's whole client path and every
row reaches the swallowed COPY (a stand-in that dropped rows, or a path that fell back to a
statement, would report a cost per row the real batch never has), and its instruction figure
is read from callgrind's totals."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

import pytest

from ujobs.drivers.postgres.copy import COLUMNS
from ujobs.jobs.enqueue_target import set_job_driver
from ujobs.wake.announce import announcing

BENCH = Path(__file__).resolve().parents[1]


def micro() -> ModuleType:
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    return importlib.import_module("enqueue_client_micro")


async def test_every_row_of_every_batch_is_a_line_of_the_swallowed_copy() -> None:
    bench = micro()
    figures = await bench.measure(3, 150)
    assert figures["rows"] == 450
    assert figures["copy_lines"] == 450  # the COPY took every batch, no statement
    assert figures["cpu_s"] >= 0


async def test_the_lines_are_whole_rows_of_the_harness_inputs() -> None:
    bench = micro()
    driver, conn = bench.swallowing_driver()
    set_job_driver(announcing(driver))
    try:
        queued = await bench.run_batches(7, 1, 10)
    finally:
        set_job_driver(None)
    assert queued == conn.lines == 10
    lines = conn.last.decode().splitlines()
    fields = lines[-1].split("\t")
    assert len(fields) == len(COLUMNS)
    assert fields[COLUMNS.index("input")] == '{"seq":79,"ts":1765000000.079}'
    assert fields[COLUMNS.index("idempotency_key")] == "bench:79:1765000000.079"


def test_the_instruction_total_is_callgrinds_totals_line() -> None:
    bench = micro()
    assert bench.callgrind_total("events: Ir\nsummary: 0\ntotals: 1234\n") == 1234
    with pytest.raises(ValueError):
        bench.callgrind_total("events: Ir\n")
