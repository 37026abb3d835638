"""What the ack statement reads, from its own plan (``EXPLAIN ANALYZE`` of the prepared
statement, rolled back), on a table never analyzed, as a worker meets a fresh queue: a batch of
acks reads each of its rows once, through the primary key, and reads nothing once per row.
Joined to the unnested arrays, the generic plan was a nested loop that re-read the whole batch
for every row (quadratic in the batch: 11 ms for 176 acks, 270 ms for 1,000), ANDed with the
running index, whose bitmap scan read every running row."""

from __future__ import annotations

from typing import Any

import asyncpg
import orjson
import pytest

from tests.support.plans import (
    explain_prepared,
    fresh_jobs_table,
    job_scans,
    looped_nodes,
    rows_read,
)
from ujobs.clock import FrozenClock
from ujobs.drivers.base import ClaimOptions, EnqueueRequest
from ujobs.drivers.postgres.driver import PostgresDriver, counter_bucket
from ujobs.drivers.postgres.sql import query

RUNNING = 2_000
BATCH = 200


def req(key: str) -> EnqueueRequest:
    return EnqueueRequest(name="send", input={"k": key}, idempotency_key=key)


async def ack_plan(
    pg: PostgresDriver, pg_pool: asyncpg.Pool[Any], clock: FrozenClock, plan_mode: str
) -> dict[str, Any]:
    """The plan of one ack of BATCH of RUNNING rows running on live leases; the rows did land."""
    await fresh_jobs_table(pg_pool)
    await pg.enqueue_many([req(f"held-{i}") for i in range(RUNNING)])
    jobs = await pg.claim(ClaimOptions(["default"], RUNNING, "w", visibility_ms=3_600_000))
    assert len(jobs) == RUNNING
    acked = jobs[:BATCH]
    # The batch as the driver sends it (sql/queries/ack.sql): {id: {claim: {worker: [ms, json]}}}
    batch = orjson.dumps({j.id: {str(j.claim): {"w": [5, None]}} for j in acked}).decode()
    ids = "{" + ",".join(j.id for j in acked) + "}"
    now = clock.now_ms()
    width, start = counter_bucket(now)
    args = f"('{ids}', $batch${batch}$batch$, {now}, {width}, {start}, 'running', '{{}}', '{{}}')"
    plan, done = await explain_prepared(
        pg_pool,
        query("ack"),
        args,
        plan_mode,
        count="select count(*) from x_jobs where state = 'done'",
    )
    assert done == BATCH
    return plan


@pytest.mark.parametrize("plan_mode", ["force_generic_plan", "force_custom_plan"])
async def test_no_part_of_an_ack_runs_once_per_row(
    pg: PostgresDriver, pg_pool: asyncpg.Pool[Any], clock: FrozenClock, plan_mode: str
) -> None:
    plan = await ack_plan(pg, pg_pool, clock, plan_mode)
    rescanned = looped_nodes(plan)
    assert not rescanned, rescanned


async def test_the_cached_generic_plan_reads_only_the_acked_rows(
    pg: PostgresDriver, pg_pool: asyncpg.Pool[Any], clock: FrozenClock
) -> None:
    """The generic plan is the one a worker keeps for the connection's life, whatever the table
    grows to; a custom plan is costed again on every call (on a table this small a scan of
    every running row is its cheapest choice)."""
    plan = await ack_plan(pg, pg_pool, clock, "force_generic_plan")
    # Until VACUUM every acked row has two primary key entries (its enqueued and its claimed
    # version); none of the other running rows is read.
    assert max(rows_read(n) for n in job_scans(plan)) <= 2 * BATCH, [
        (n["Node Type"], n.get("Index Name"), rows_read(n)) for n in job_scans(plan)
    ]
