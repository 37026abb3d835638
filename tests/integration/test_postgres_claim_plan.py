"""What the claim statement reads, from its own plan (``EXPLAIN ANALYZE`` of the prepared
statement, rolled back): with thousands of rows running on live leases, a claim reads none of
them. The lapsed-lease arm walks ``x_jobs_running_lease_idx (queue, lease_expires_at)`` up to
now, so it meets only the rows whose lease lapsed (0005); on an index of running rows by queue
alone it read every running row of the queue on every claim."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest

from tests.support.plans import (
    explain_prepared,
    fresh_jobs_table,
    job_scans,
    rows_read,
)
from ujobs.clock import FrozenClock
from ujobs.drivers.base import ClaimOptions, EnqueueRequest
from ujobs.drivers.postgres.driver import PostgresDriver, counter_bucket
from ujobs.drivers.postgres.sql import query

RUNNING = 2_000
LAPSED = 3
DUE = 16


def req(key: str) -> EnqueueRequest:
    return EnqueueRequest(name="send", input={"k": key}, idempotency_key=key)


def claim(limit: int, visibility_ms: int, worker: str = "holder") -> ClaimOptions:
    return ClaimOptions(["default"], limit, worker, visibility_ms=visibility_ms)


@pytest.mark.parametrize("plan_mode", ["force_generic_plan", "force_custom_plan"])
async def test_a_claim_reads_none_of_the_rows_running_on_live_leases(
    pg: PostgresDriver, pg_pool: asyncpg.Pool[Any], clock: FrozenClock, plan_mode: str
) -> None:
    await fresh_jobs_table(pg_pool)
    await pg.enqueue_many([req(f"lapses-{i}") for i in range(LAPSED)])
    assert len(await pg.claim(claim(LAPSED, 1_000, "died"))) == LAPSED
    await pg.enqueue_many([req(f"held-{i}") for i in range(RUNNING)])
    assert len(await pg.claim(claim(RUNNING, 3_600_000))) == RUNNING
    await pg.enqueue_many([req(f"due-{i}") for i in range(DUE)])
    clock.advance(1_000)  # the first three leases lapse; the 2,000 have an hour left
    await pg_pool.execute("analyze x_jobs")
    now = clock.now_ms()
    width, start = counter_bucket(now)
    # EXPLAIN takes no bind parameters: the arguments are literals (all integers here); the
    # last three: four rows started at once, the rest claimed ahead; three ahead hand-backs;
    # no settlements outbox.
    args = (
        f"('{{default}}', {DUE}, 'w', {now}, 60000, '{{}}', {width}, {start}, 4, 3, false, '{{}}')"
    )
    plan, taken = await explain_prepared(
        pg_pool,
        query("claim"),
        args,
        plan_mode,
        count="select count(*) from x_jobs where claimed_by = 'w'",
    )
    scans = job_scans(plan)
    assert scans, "the plan reads x_jobs somewhere"
    assert max(rows_read(node) for node in scans) <= DUE + LAPSED, [
        (node.get("Index Name"), rows_read(node)) for node in scans
    ]
    lapsed_arm = [node for node in scans if node.get("Index Name") == "x_jobs_running_lease_idx"]
    assert lapsed_arm, [(n["Node Type"], n.get("Index Name"), rows_read(n)) for n in scans]
    assert sum(int(node["Actual Rows"]) for node in lapsed_arm) == LAPSED
    assert taken == DUE  # it did claim: the three lapsed rows (the oldest) and 13 due ones
