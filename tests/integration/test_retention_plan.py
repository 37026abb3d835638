"""What a purge batch reads, from its own plan under the worker pool's GENERIC plans: the
finished rows' partial index, walked in order from the oldest, and never a scan of the table.
With `state = $1` alone a generic plan could not prove the partial index's predicate and sorted
a sequential scan of the whole table (8.7 s a batch over a million rows)."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest

from tests.support.plans import explain_prepared, fresh_jobs_table, job_scans
from ujobs.drivers.postgres.sql import query

T0 = 1_700_000_000_000
DAY = 86_400_000
ROWS = 20_000


@pytest.mark.parametrize("plan_mode", ["force_generic_plan", "force_custom_plan"])
async def test_a_purge_batch_walks_the_finished_index_and_never_the_table(
    pg_pool: asyncpg.Pool[Any], plan_mode: str
) -> None:
    await fresh_jobs_table(pg_pool)
    await pg_pool.execute(
        "insert into x_jobs (id, run_id, name, state, input, idempotency_key, max_attempts,"
        " run_at, created_at, updated_at, finished_at)"
        " select 'j' || n, 'r' || n, 'j', case when n % 10 = 0 then 'ready' else 'done' end,"
        " '{}', 'k' || n, 1, x_ts($1), x_ts($1), x_ts($1),"
        " case when n % 10 = 0 then null else x_ts($1 - n::bigint * 1000) end"
        " from generate_series(1, $2::int) n",
        T0 - 30 * DAY,
        ROWS,
    )
    await pg_pool.execute("analyze x_jobs")
    plan, left = await explain_prepared(
        pg_pool,
        query("jobs_purge"),
        f"('done', {T0 - 14 * DAY}, 1000, null, {T0})",
        plan_mode,
        count="select count(*) from x_jobs where state = 'done'",
    )
    assert left == ROWS - ROWS // 10 - 1_000  # the batch deleted 1,000 rows
    scans = [(n["Node Type"], n.get("Index Name")) for n in job_scans(plan)]
    assert ("Index Scan", "x_jobs_finished_idx") in scans
    assert not [s for s in scans if s[0] in ("Seq Scan", "Bitmap Heap Scan")], scans
