"""Test-wide setup: a clean process state per test, and the real servers (see support/)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from ujobs.events.bus import reset_event_bus
from ujobs.jobs.enqueue_target import reset_job_driver, reset_jobs_facade
from ujobs.jobs.job import reset_declared_names
from ujobs.jobs.registry import reset_registry

pytest_plugins = ["tests.support.services"]

settings.register_profile(
    "ci", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("ci")


@pytest.fixture(autouse=True)
def _clean_process_state() -> Iterator[None]:
    """Every test starts with no declared names, no registry, no driver, no facade and an
    empty event bus."""
    reset_declared_names()
    reset_registry()
    reset_job_driver()
    reset_jobs_facade()
    reset_event_bus()
    yield
    reset_declared_names()
    reset_registry()
    reset_job_driver()
    reset_jobs_facade()
    reset_event_bus()
