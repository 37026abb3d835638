"""What a parent's wait reads, from the plans of its two statements (``children_mark`` and
``children_read``, ``EXPLAIN ANALYZE`` of the prepared statement, rolled back), for a fan-in of
a thousand children: the ids asked for are joined, never tested as ``id = any($2)``. Against
the array, the generic plan probed the parent's index (parent_id, created_at, id) and tested
every entry of the parent against the whole array: a thousand by a thousand comparisons, 47 ms
of a 1,000-child gather's 55 ms read, where the join reads the same rows in about 1 ms."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest

from tests.support.plans import explain_prepared, fresh_jobs_table, job_scans
from ujobs.drivers.base import EnqueueRequest
from ujobs.drivers.children import children_of
from ujobs.drivers.postgres.driver import PostgresDriver
from ujobs.drivers.postgres.sql import query
from ujobs.ids import new_ids

CHILDREN = 1_000


async def fan_out(pg: PostgresDriver, pg_pool: asyncpg.Pool[Any]) -> tuple[str, list[str]]:
    """A parent and its CHILDREN children, as ``run.step.enqueue_many`` makes them."""
    await fresh_jobs_table(pg_pool)
    parent = await pg.enqueue(EnqueueRequest(name="parent", input={}, idempotency_key="p"))
    children = children_of(pg)
    assert children is not None
    ids = new_ids(CHILDREN)
    runs = new_ids(CHILDREN)
    made = await children.enqueue_many(
        [
            EnqueueRequest(
                name="child", input={"n": i}, idempotency_key=ids[i], id=ids[i], run_id=runs[i]
            )
            for i in range(CHILDREN)
        ],
        parent_id=parent.id,
        detached=False,
    )
    assert made == ids
    return parent.id, ids


def array_tests(plan: dict[str, Any]) -> list[tuple[str, str]]:
    """The conditions of the plan's x_jobs scans that test a row's id against an array (a
    state tested against its four live names is a short literal list, not the ids)."""
    return [
        (n["Node Type"], cond)
        for n in job_scans(plan)
        for cond in (n.get("Index Cond", ""), n.get("Filter", ""), n.get("Recheck Cond", ""))
        if "id = ANY" in cond
    ]


@pytest.mark.parametrize("statement", ["children_read", "children_mark"])
@pytest.mark.parametrize("plan_mode", ["force_generic_plan", "force_custom_plan"])
async def test_a_wait_joins_its_ids_and_never_tests_rows_against_the_array(
    pg: PostgresDriver, pg_pool: asyncpg.Pool[Any], statement: str, plan_mode: str
) -> None:
    parent_id, ids = await fan_out(pg, pg_pool)
    args = f"('{parent_id}', '{{{','.join(ids)}}}')"
    plan, children = await explain_prepared(
        pg_pool,
        query(statement),
        args,
        plan_mode,
        count=f"select count(*) from x_jobs where parent_id = '{parent_id}'",
    )
    assert children == CHILDREN
    assert not array_tests(plan), array_tests(plan)


async def test_a_wait_answers_each_child_once_when_an_id_is_asked_twice(
    pg: PostgresDriver, pg_pool: asyncpg.Pool[Any]
) -> None:
    parent_id, ids = await fan_out(pg, pg_pool)
    children = children_of(pg)
    assert children is not None
    asked = ids[:10] + ids[:10]
    rows = await children.read(parent_id, asked)
    assert sorted(r.id for r in rows) == sorted(ids[:10])
    tally = await children.mark(parent_id, asked)
    assert (tally.found, tally.live, tally.ended_badly) == (10, 10, 0)
