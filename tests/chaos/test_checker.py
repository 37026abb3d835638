"""The storm's checks on hand-made rows: each figure counts what it says, and a re-run is
explained only by a disruption of the process that first ran the step."""

from __future__ import annotations

from typing import Any

import pytest

from tests.chaos.checker import Disruptions, check_core, check_hostile, server_error

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


def test_a_hostile_message_neither_landed_nor_refused_is_unsettled() -> None:
    figures = check_hostile(
        published={"m1": "deep", "m2": "oversized", "m3": "revoked", "m4": "deep"},
        refused={"m2": "X_INPUT_INVALID", "m3": "X_UNAUTHORIZED", "other": "X_INTERNAL"},
        landed={"m1"},
        answers={"http deep 400": 3},
        server_errors=[],
        revoked={"m3"},
        revoked_answered=[],
    )
    assert figures["stream_messages_unsettled"] == 1  # m4
    assert figures["stream_messages_unsettled_kinds"] == ["deep"]
    assert figures["answers_5xx"] == 0  # another participant's refusal is not counted
    assert figures["revoked_accepted"] == 0


def test_a_5xx_or_x_internal_answer_to_hostile_traffic_counts_but_a_transient_503_does_not() -> (
    None
):
    assert server_error(500, "X_INTERNAL")
    assert server_error(200, "X_INTERNAL")  # a NATS reply carries its code, not a status
    assert server_error(502, None)
    assert not server_error(503, "X_DRIVER_UNREACHABLE")
    assert not server_error(503, "X_DRAINING")
    assert not server_error(400, "X_INPUT_INVALID")
    assert not server_error(413, None)
    figures = check_hostile(
        published={"m1": "deep", "m2": "revoked"},
        refused={"m1": "X_INTERNAL"},
        landed={"m2"},
        answers={},
        server_errors=["http deep: 500"],
        revoked={"m2"},
        revoked_answered=["nats revoked: id"],
    )
    assert figures["answers_5xx"] == 2
    assert figures["revoked_accepted"] == 2  # one answered with an id, one landed
