"""``ujobs.drivers.fairness``: the hand-out order every driver follows, as a pure function —
the walk from the cursor, the weighted rounds, the work-conserving fill, lapsed rows first,
strict queues first-in first-out, and the cursor it leaves; and the weight checks."""

from __future__ import annotations

import pytest

from ujobs.drivers.fairness import (
    FairRow,
    check_tenant,
    check_weight,
    claim_order,
    group_of,
    walk,
)
from ujobs.errors import InputInvalidError


def rows(tenant: str, n: int, *, queue: str = "q", start: int = 0) -> list[FairRow]:
    return [FairRow(f"{queue}-{tenant}-{i}", queue, tenant, start + i, start + i) for i in range(n)]


def test_the_walk_starts_after_the_cursor_and_wraps_round_to_it() -> None:
    assert walk(["c", "a", "b", ""], None, 10) == ["", "a", "b", "c"]
    assert walk(["c", "a", "b", ""], "a", 10) == ["b", "c", "", "a"]
    assert walk(["c", "a", "b", ""], "a", 2) == ["b", "c"]
    assert walk(["a", "b"], "zzz", 10) == ["a", "b"]  # a cursor past every tenant wraps


def test_weighted_rounds_then_the_fill_then_the_cursor() -> None:
    due = rows("a", 10) + rows("b", 10, start=100)
    plan = claim_order(due, limit=8, weights={"a": 3})
    # rounds = ceil(8 / 4) = 2; each round a gives 3, b gives 1.
    assert [r.tenant for r in plan.rows] == ["a", "a", "a", "b", "a", "a", "a", "b"]
    assert plan.cursors == {"q": "b"}
    nxt = claim_order(due, limit=2, cursors=plan.cursors, weights={"a": 3})
    assert [r.tenant for r in nxt.rows] == ["a", "a"]  # after b comes a


def test_a_lone_tenant_and_a_short_tenant_leave_no_slot_idle() -> None:
    alone = claim_order(rows("a", 20), limit=16)
    assert [r.id for r in alone.rows] == [f"q-a-{i}" for i in range(16)]
    short = claim_order(rows("a", 20) + rows("b", 1, start=50), limit=6)
    assert [r.tenant for r in short.rows] == ["a", "b", "a", "a", "a", "a"]


def test_lapsed_rows_come_first_and_strict_queues_are_fifo() -> None:
    lapsed = [FairRow("late", "q", "z", 999, 999)]
    plan = claim_order(rows("a", 5) + rows("b", 1, start=10), limit=3, lapsed=lapsed)
    assert [r.id for r in plan.rows] == ["late", "q-a-0", "q-b-0"]
    strict = claim_order(
        rows("a", 5, queue="s") + rows("b", 1, queue="s", start=10),
        limit=3,
        strict=frozenset({"s"}),
    )
    assert [r.id for r in strict.rows] == ["s-a-0", "s-a-1", "s-a-2"]
    assert strict.cursors == {}


def test_tenants_waiting_on_later_rows_take_their_place_in_the_walk() -> None:
    plan = claim_order(rows("b", 4), limit=2, waiting={"q": [(0, "a")]})
    # a (no due row) is walked first and counts in the rounds: b gets ceil(2 / 2) = 1 fair
    # row, the fill gives it the other.
    assert [r.id for r in plan.rows] == ["q-b-0", "q-b-1"]


def test_tenant_less_jobs_are_one_group_and_weights_are_checked() -> None:
    assert group_of(None) == ""
    assert check_weight(1) == 1
    assert check_weight(1000) == 1000
    for bad in (0, 1001, True, 2.0, "3"):
        with pytest.raises(InputInvalidError):
            check_weight(bad)
    for tenant in ("", "t" * 201, 7):
        with pytest.raises(InputInvalidError):
            check_tenant(tenant)
