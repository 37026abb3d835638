"""The storm's checks on hand-made rows: each figure counts what it says, and a re-run is
explained only by a disruption of the process that first ran the step."""

from __future__ import annotations

from typing import Any

import pytest

from tests.chaos.checker import Disruptions, check_core

pytestmark = pytest.mark.chaos


def job(job_id: str, state: str = "done", *, fresh: bool = False) -> dict[str, Any]:
    return {
        "id": job_id,
        "name": "storm.work",
        "state": state,
        "input": {"at_ms": 1_000},
        "fresh": fresh,
    }


def effect(job_id: str, step: str, pid: int, at_ms: int, attempt: int = 1) -> dict[str, Any]:
    return {"job_id": job_id, "step": step, "attempt": attempt, "pid": pid, "at_ms": at_ms}


def whole(job_id: str, pid: int, at_ms: int) -> list[dict[str, Any]]:
    return [effect(job_id, s, pid, at_ms + i) for i, s in enumerate(("a", "b", "end"))]


def test_a_quiet_run_has_nothing_to_report() -> None:
    figures = check_core(
        [job("j1"), job("j2")],
        whole("j1", 10, 1_050) + whole("j2", 10, 1_100),
        {"direct": ["j1", "j2"]},
        Disruptions(),
        {"storm.work": 2},
    )
    assert figures["lost"] == figures["stuck"] == figures["completed_twice"] == 0
    assert figures["steps_rerun"] == figures["bodies_ended_twice"] == 0
    assert figures["p99_pickup_ms_during_storm"] == 100


def test_lost_stuck_and_done_twice_are_counted() -> None:
    figures = check_core(
        [job("j1"), job("j2", "running"), job("j3", "ready", fresh=True)],
        whole("j1", 10, 1_050),
        {"direct": ["j1", "j2", "gone"]},
        Disruptions(),
        {"storm.work": 2},  # the ack of j1 counted twice
    )
    assert (figures["lost"], figures["lost_ids"]) == (1, ["gone"])
    assert (figures["stuck"], figures["stuck_ids"]) == (1, ["j2"])  # j3 is due just now
    assert figures["completed_twice"] == 1


def test_a_rerun_is_explained_only_by_a_disruption_of_its_first_runner() -> None:
    ledger = [
        effect("j1", "a", 10, 1_050),
        effect("j1", "a", 11, 9_000, attempt=2),
        effect("j2", "a", 12, 1_060),
        effect("j2", "a", 11, 9_100, attempt=2),
    ]
    figures = check_core(
        [job("j1"), job("j2")],
        ledger,
        {},
        Disruptions(killed_pids={10}),
        {"storm.work": 2},
    )
    assert figures["steps_rerun"] == 2
    assert figures["steps_rerun_unexplained_ids"] == ["j2/a"]
    across_restart = check_core(
        [job("j2")], ledger[2:], {}, Disruptions(restarts_ms=[(5_000, 7_000)]), {}
    )
    assert across_restart["steps_rerun_unexplained"] == 0
    assert across_restart["done_without_end"] == 1


def test_a_body_ended_twice_is_explained_by_a_freeze_of_the_runner_that_ended_second() -> None:
    ledger = [*whole("j1", 20, 5_000), effect("j1", "end", 21, 6_000)]
    jobs, counted = [job("j1")], {"storm.work": 1}
    quiet = check_core(jobs, ledger, {}, Disruptions(), counted)
    frozen = check_core(jobs, ledger, {}, Disruptions(stopped_pids={21}), counted)
    assert (quiet["bodies_ended_twice"], quiet["bodies_ended_twice_unexplained"]) == (1, 1)
    assert (frozen["bodies_ended_twice"], frozen["bodies_ended_twice_unexplained"]) == (1, 0)
    assert frozen["completed_twice"] == 0  # settled done once
