"""A fired occurrence names its jobs: the same ids every time it is fired, in any process, and
different ids for every other occurrence, entry or task."""

from __future__ import annotations

import uuid

from tests.support.scheduler import HOUR, T0, tick_job, ticking_task
from ujobs.ids import derived_id
from ujobs.jobs.task import occurrence_ids


def test_firing_an_occurrence_twice_names_the_same_jobs_and_runs() -> None:
    handle = tick_job()
    task = ticking_task(handle)
    first, again = task.requests_for(T0), task.requests_for(T0)
    assert [(r.id, r.run_id) for r in first] == [(r.id, r.run_id) for r in again]
    assert (first[0].id, first[0].run_id) == occurrence_ids("hourly", T0, 0, "tick")
    assert first[0].id != first[0].run_id
    assert task.requests_for(T0 + HOUR)[0].id != first[0].id


def test_every_entry_task_and_job_gets_its_own_id() -> None:
    ids = {
        occurrence_ids("hourly", T0, 0, "tick"),
        occurrence_ids("hourly", T0, 1, "tick"),
        occurrence_ids("nightly", T0, 0, "tick"),
        occurrence_ids("hourly", T0, 0, "tock"),
        occurrence_ids("hourly", T0 + 1, 0, "tick"),
    }
    assert len(ids) == 5
    # Length-prefixed parts: moving a character between two parts is another id.
    assert derived_id(T0, "ab", "c") != derived_id(T0, "a", "bc")


def test_a_derived_id_is_a_uuidv8_that_sorts_by_its_time() -> None:
    parsed = uuid.UUID(derived_id(T0, "x"))
    assert (parsed.version, parsed.variant) == (8, uuid.RFC_4122)
    assert int(parsed.hex[:12], 16) == T0
    assert derived_id(T0, "z") < derived_id(T0 + 1, "a")
