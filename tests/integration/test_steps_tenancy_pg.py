"""Postgres' own share of "a runId is a namespace of its tenant" (issue 34, item 1): the
retention sweep and its orphan pass judge a run by its run_id UNDER ITS TENANT, and migration
0017 gives existing step rows the tenant of their run's job."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import asyncpg

from ujobs.drivers.postgres.sql import migration_files
from ujobs.retention import jobs_purge_target

if TYPE_CHECKING:
    Pool = asyncpg.Pool[Any]
else:
    Pool = asyncpg.Pool
T0 = 1_700_000_000_000
DAY = 86_400_000
RUN = "order-42"
STEPS_MIGRATION = "0017_steps_tenancy"

_JOB = """
insert into x_jobs (id, run_id, name, state, input, tenant_id, idempotency_key, max_attempts,
                    run_at, created_at, updated_at, finished_at)
values ($1, $2, 'j', $3, '{}', $4, $1, 1, x_ts($5), x_ts($5), x_ts($5),
        case when $3 in ('done', 'failed', 'dead', 'cancelled') then x_ts($5) end)
"""
_STEP = """
insert into x_job_steps (run_id, tenant_id, name, output, started_at, finished_at)
values ($1, $2, $3, '1', x_ts($4), x_ts($4))
"""


async def _steps(pool: Pool) -> list[tuple[str, str, str]]:
    rows = await pool.fetch(
        "select run_id, tenant_id, name from x_job_steps order by run_id, tenant_id, name"
    )
    return [(r["run_id"], r["tenant_id"], r["name"]) for r in rows]


async def test_a_purged_run_takes_its_steps_though_another_tenant_reuses_its_id(
    pg_pool: Pool,
) -> None:
    await pg_pool.execute(_JOB, "a", RUN, "done", "org-a", T0 - 30 * DAY)
    await pg_pool.execute(_STEP, RUN, "org-a", "quote", T0 - 30 * DAY)
    await pg_pool.execute(_JOB, "b", RUN, "done", "org-b", T0 - DAY)
    await pg_pool.execute(_STEP, RUN, "org-b", "quote", T0 - DAY)
    target = jobs_purge_target(executor=pg_pool)
    assert await target.purge_expired(T0) == 2  # A's row and A's step, in one statement
    assert (target.last.jobs, target.last.steps) == (1, 1)
    assert await _steps(pg_pool) == [(RUN, "org-b", "quote")]


async def test_a_run_split_between_two_sweeps_settles_its_tenant_s_steps(pg_pool: Pool) -> None:
    for job_id in ("a1", "a2"):
        await pg_pool.execute(_JOB, job_id, RUN, "done", "org-a", T0 - 30 * DAY)
    await pg_pool.execute(_STEP, RUN, "org-a", "quote", T0 - 30 * DAY)
    await pg_pool.execute(_JOB, "b", RUN, "running", "org-b", T0)
    await pg_pool.execute(_STEP, RUN, "org-b", "quote", T0)
    target = jobs_purge_target(executor=pg_pool, batch_size=1, max_batches=1)
    async with pg_pool.acquire() as conn, conn.transaction():
        await conn.execute("select 1 from x_jobs where id = 'a1' for update")
        # The sweep takes "a2" alone: "a1" (locked) still stands, so the follow-up keeps them.
        assert await target.purge_expired(T0) == 1
    assert await _steps(pg_pool) == [(RUN, "org-a", "quote"), (RUN, "org-b", "quote")]
    assert await target.purge_expired(T0) == 2  # "a1" and A's step; B's live run keeps its own
    assert await _steps(pg_pool) == [(RUN, "org-b", "quote")]


async def test_the_orphan_pass_judges_each_tenant_s_run_on_its_own(pg_pool: Pool) -> None:
    await pg_pool.execute(_JOB, "b", RUN, "running", "org-b", T0)
    await pg_pool.execute(_STEP, RUN, "org-b", "quote", T0)
    await pg_pool.execute(_STEP, RUN, "org-a", "quote", T0 - DAY)  # A's job is gone
    await pg_pool.execute(_STEP, RUN, "", "quote", T0 - DAY)  # so is the tenant-less one
    target = jobs_purge_target(executor=pg_pool)
    assert await target.purge_expired(T0) == 2
    assert await _steps(pg_pool) == [(RUN, "org-b", "quote")]


async def test_migration_0017_gives_each_step_the_tenant_of_its_run(pg_fresh_dsn: str) -> None:
    conn = await asyncpg.connect(pg_fresh_dsn)
    try:
        files = migration_files()
        for name, text in files:
            if name == STEPS_MIGRATION:
                break
            await conn.execute(text)
        old_step = (
            "insert into x_job_steps (run_id, name, output, started_at, finished_at)"
            " values ($1, $2, '1', x_ts($3), x_ts($3))"
        )
        for job_id, run_id, tenant, at in (
            ("t", "tenant-run", "org-a", T0),
            ("n", "plain-run", None, T0),
            ("victim", RUN, "org-a", T0),  # then another tenant's job reused its run_id
            ("reuser", RUN, "org-b", T0 + DAY),
            ("continued", "long-run", "org-a", T0 + DAY),  # its first row is gone
        ):
            await conn.execute(_JOB, job_id, run_id, "done", tenant, at)
        for run_id, name, at in (
            ("tenant-run", "s", T0 + 1),
            ("plain-run", "s", T0 + 1),
            (RUN, "quote", T0 + 1),  # only A's job existed: A's
            (RUN, "charge", T0 + DAY + 1),  # both existed: nobody can tell, dropped
            ("long-run", "s", T0 + 1),  # its writer is gone; its run is A's alone now
            ("gone-run", "s", T0 + 1),  # no job carries it: dropped
        ):
            await conn.execute(old_step, run_id, name, at)
        await conn.execute(dict(files)[STEPS_MIGRATION])
        rows = await conn.fetch(
            "select run_id, tenant_id, name from x_job_steps order by run_id, name"
        )
        assert [(r["run_id"], r["tenant_id"], r["name"]) for r in rows] == [
            ("long-run", "org-a", "s"),
            (RUN, "org-a", "quote"),
            ("plain-run", "", "s"),
            ("tenant-run", "org-a", "s"),
        ]
        # The same run_id and name under another tenant is another row from now on.
        await conn.execute(
            "insert into x_job_steps (run_id, tenant_id, name, started_at, finished_at)"
            " values ($1, 'org-b', 'quote', now(), now())",
            RUN,
        )
    finally:
        await conn.close()
