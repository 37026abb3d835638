"""``ujobs queues list`` marks a capped figure (a lower bound) with ``≥``, an exact one bare."""

from __future__ import annotations

from ujobs.services.cli.queues import _figure


def test_a_capped_figure_reads_as_a_lower_bound_and_an_exact_one_as_is() -> None:
    queue = {"ready": 10_001, "running": 3, "capped": ["due", "ready"]}
    assert _figure(queue, "ready") == "≥10001"
    assert _figure(queue, "running") == "3"
