"""What the claim statement reads, from its own plan (``EXPLAIN ANALYZE`` of the prepared
statement, rolled back): with thousands of rows running on live leases, a claim reads none of
them. The lapsed-lease arm walks ``x_jobs_running_lease_idx (queue, lease_expires_at)`` up to
now, so it meets only the rows whose lease lapsed (0005); on an index of running rows by queue
alone it read every running row of the queue on every claim. The due arm walks
``x_jobs_claim_priority_idx (queue, priority, run_at, seq)`` band by band (0028) and stops at
its limit, so a backlog of a lower priority behind it is never read."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest

from tests.support.plans import (
    explain_prepared,
    fresh_jobs_table,
    job_scans,
    plan_nodes,
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


BACKLOG = 3_000
"""Rows of the lowest band (9) waiting behind the few urgent ones."""


@pytest.mark.parametrize("plan_mode", ["force_generic_plan", "force_custom_plan"])
async def test_a_claim_walks_the_priority_index_band_by_band_and_stops_at_its_limit(
    pg: PostgresDriver, pg_pool: asyncpg.Pool[Any], clock: FrozenClock, plan_mode: str
) -> None:
    """Per queue the claim walks ``x_jobs_claim_priority_idx`` one band at a time, from
    priority 0, and stops once it holds ``limit`` rows: a backlog of priority 9 behind them is
    never read, and no Sort gathers every band's rows before the limit (which would read, and
    lock, up to ten times the limit)."""
    await fresh_jobs_table(pg_pool)
    await pg.enqueue_many(
        [
            EnqueueRequest(name="send", input={}, idempotency_key=f"low-{i}", priority=9)
            for i in range(BACKLOG)
        ]
    )
    await pg.enqueue_many(
        [
            EnqueueRequest(name="send", input={}, idempotency_key=f"p{p}-{i}", priority=p)
            for p in (0, 3)
            for i in range(DUE // 2)
        ]
    )
    clock.advance(1_000)
    await pg_pool.execute("analyze x_jobs")
    now = clock.now_ms()
    width, start = counter_bucket(now)
    # The queue strict ($12): the band walk as the fill makes it, with no fair scan beside it
    # (test_postgres_fair_plan.py reads the fair one's plan).
    args = (
        f"('{{default}}', {DUE}, 'w', {now}, 60000, '{{}}', {width}, {start}, null, 3, false,"
        " '{default}')"
    )
    plan, taken = await explain_prepared(
        pg_pool,
        query("claim"),
        args,
        plan_mode,
        count="select count(*) from x_jobs where claimed_by = 'w' and priority in (0, 3)",
    )
    assert taken == DUE  # the eight of band 0 and the eight of band 3; none of band 9
    band_scans = [n for n in job_scans(plan) if n.get("Index Name") == "x_jobs_claim_priority_idx"]
    assert band_scans, [(n["Node Type"], n.get("Index Name")) for n in job_scans(plan)]
    # Bands 0 to 3 were walked (1 and 2 empty: one index descent each); 4 to 9 never.
    assert sum(int(n["Actual Loops"]) for n in band_scans) == 4
    assert sum(rows_read(n) for n in band_scans) == DUE
    assert "x_jobs_claim_idx" not in {n.get("Index Name") for n in job_scans(plan)}
    assert not _sorts_between_the_queue_limit_and_its_bands(plan)


def _sorts_between_the_queue_limit_and_its_bands(node: dict[str, Any]) -> list[str]:
    """The Sort nodes under a Limit whose subtree walks the priority index: each would read
    every band before the queue's limit applies."""
    found: list[str] = []
    for limit in (n for n in plan_nodes(node) if n["Node Type"] == "Limit"):
        below = plan_nodes(limit)[1:]
        walks = any(n.get("Index Name") == "x_jobs_claim_priority_idx" for n in below)
        found += [n["Node Type"] for n in below if walks and n["Node Type"] == "Sort"]
    return found
