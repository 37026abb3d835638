"""What a scheduler fire reads, from its own plan (``EXPLAIN ANALYZE`` of the prepared
statement, rolled back): an occurrence that enqueues many jobs reads its request list once.
Each job's own dedupe probes (by id, by live key) run once per job by design; nothing else
does. The insert once read the requests joined back to the dedupe results on their ordinal, and
the custom plan nested the two, re-reading the whole list for every job (500 jobs: 134-168 ms,
against 36-41 ms without the join)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import asyncpg
import pytest

from tests.support.plans import explain_prepared, fresh_jobs_table, looped_nodes
from ujobs.clock import FrozenClock
from ujobs.drivers.postgres.sql import query

JOBS = 300
# The nodes of the per-job probes (sql/queries/scheduler_fire.sql, `found`).
PROBES = frozenset(
    {"Limit", "Index Scan", "Index Only Scan", "Bitmap Heap Scan", "Bitmap Index Scan"}
)


def text_array(values: Sequence[str | None]) -> str:
    inner = ",".join("null" if v is None else '"' + v + '"' for v in values)
    return "'{" + inner + "}'"


@pytest.mark.parametrize("plan_mode", ["force_generic_plan", "force_custom_plan"])
async def test_a_fire_reads_its_jobs_once(
    pg_pool: asyncpg.Pool[Any], clock: FrozenClock, plan_mode: str
) -> None:
    await fresh_jobs_table(pg_pool)
    now = clock.now_ms()
    ids = [str(uuid.uuid4()) for _ in range(JOBS)]
    arrays = [
        text_array(ids),
        text_array([str(uuid.uuid4()) for _ in range(JOBS)]),
        text_array(["report"] * JOBS),
        text_array(["default"] * JOBS),
        text_array(['{\\"n\\":1}'] * JOBS),
        text_array([None] * JOBS),
        text_array([f"nightly:{i}" for i in range(JOBS)]),
        "'{" + ",".join(["3"] * JOBS) + "}'",
        "'{" + ",".join([str(now)] * JOBS) + "}'",
        text_array([None] * JOBS),
        text_array([None] * JOBS),
        "'{" + ",".join(["0"] * JOBS) + "}'",
    ]
    args = f"('nightly', {now}, {now}, {now}, " + ", ".join(arrays) + ")"
    plan, inserted = await explain_prepared(
        pg_pool, query("scheduler_fire"), args, plan_mode, count="select count(*) from x_jobs"
    )
    assert inserted == JOBS
    rescanned = looped_nodes(plan, allowed=PROBES)
    assert not rescanned, rescanned
