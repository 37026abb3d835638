"""The collector's first threshold for a service process (``UJOBS_GC_THRESHOLD``).

A worker allocates a few hundred short-lived objects per job (the claimed row, its run, its
settle), nearly all freed by reference counting; none outlive the job in a cycle. Python's
default first threshold (700 allocations) runs a young collection every two or three jobs,
each scanning objects that were about to be freed anyway. A service process raises the
threshold once it has started, so a young collection runs every few dozen jobs instead: the
same garbage is found, at a fraction of the scans (bench/RESULTS.md, the worker's CPU per job).
The older generations keep Python's ratios. Only the service processes ``ujobs`` starts do
this; a worker embedded in an application (``job_worker()``) leaves the host's collector alone.
"""

from __future__ import annotations

import gc

from ujobs.services.config.variables import DEFAULT_GC_THRESHOLD

__all__ = ["DEFAULT_GC_THRESHOLD", "tune_gc"]


def tune_gc(threshold: int) -> tuple[int, int, int]:
    """Set the first threshold (0: leave Python's); answers the thresholds now in force."""
    if threshold > 0:
        _, older, oldest = gc.get_threshold()
        gc.set_threshold(threshold, older, oldest)
    return gc.get_threshold()
