"""``UJOBS_GC_THRESHOLD``: a service process raises the collector's first threshold once."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from ujobs.services.runtime.gc_tuning import DEFAULT_GC_THRESHOLD, tune_gc


@pytest.fixture
def restored_thresholds() -> Iterator[tuple[int, int, int]]:
    before = gc.get_threshold()
    try:
        yield before
    finally:
        gc.set_threshold(*before)


def test_the_first_threshold_is_raised_and_the_older_ones_kept(
    restored_thresholds: tuple[int, int, int],
) -> None:
    _, older, oldest = restored_thresholds
    assert tune_gc(DEFAULT_GC_THRESHOLD) == (DEFAULT_GC_THRESHOLD, older, oldest)
    assert gc.get_threshold() == (DEFAULT_GC_THRESHOLD, older, oldest)


def test_zero_leaves_the_collector_as_python_set_it(
    restored_thresholds: tuple[int, int, int],
) -> None:
    gc.set_threshold(700, 10, 10)
    assert tune_gc(0) == (700, 10, 10)
    assert gc.get_threshold() == (700, 10, 10)
